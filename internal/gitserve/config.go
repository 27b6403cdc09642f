package gitserve

import (
	"errors"
	"net"
	"strconv"
	"time"

	"github.com/grasp-sync/grasp-sync/internal/setting"
)

// ErrInvalidConfig is matched (errors.Is) by every error of Config.Validate.
var ErrInvalidConfig = errors.New("invalid git server config")

// Defaults of Config.
const (
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultRequestTimeout    = 10 * time.Minute
	DefaultIdleTimeout       = time.Minute
	DefaultMaxConcurrent     = 16
)

// Config is the configuration's git_http section: each setting carries its
// YAML key and help text (flag, environment variable and documentation are
// derived from them).
type Config struct {
	// Listen is the listen address; empty: no git server.
	Listen string `yaml:"listen" help:"Address of the read-only git server (smart HTTP: clone and fetch; a push is refused) serving <git_dir>/<npub>/<identifier>.git at http://ADDRESS/<npub>/<identifier>.git, e.g. 127.0.0.1:8080. Empty: off. Needs git_dir and git's http-backend command."`
	// ReadHeaderTimeout bounds the wait for a request's headers.
	ReadHeaderTimeout time.Duration `yaml:"read_header_timeout" help:"Time a client of the git server has to send its request headers."`
	// RequestTimeout bounds one request from its headers to its last byte,
	// the wait for a slot included; git http-backend is killed after it.
	RequestTimeout time.Duration `yaml:"request_timeout" help:"Longest time one git request may take (a ref advertisement, or the pack of a clone or fetch), waiting for a slot included; git http-backend is stopped after it."`
	// IdleTimeout bounds an idle keep-alive connection.
	IdleTimeout time.Duration `yaml:"idle_timeout" help:"Time an idle keep-alive connection to the git server stays open."`
	// MaxConcurrent bounds the git http-backend processes running at once.
	MaxConcurrent int `yaml:"max_concurrent" help:"Git requests served at once (each runs git http-backend); more wait for a slot within request_timeout, then get 503."`
}

// DefaultConfig returns the defaults (Listen empty: off).
func DefaultConfig() Config {
	return Config{
		ReadHeaderTimeout: DefaultReadHeaderTimeout, RequestTimeout: DefaultRequestTimeout,
		IdleTimeout: DefaultIdleTimeout, MaxConcurrent: DefaultMaxConcurrent,
	}
}

// Enabled reports whether a git server is configured.
func (c Config) Enabled() bool { return c.Listen != "" }

// Validate reports every invalid setting, each as a *setting.Error keyed by
// its YAML key.
func (c Config) Validate() error {
	v := setting.Checks{Kind: ErrInvalidConfig}
	if c.Listen != "" {
		if _, port, err := net.SplitHostPort(c.Listen); err != nil {
			v.Fail("listen", "must be HOST:PORT or :PORT (empty: off)", c.Listen)
		} else if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
			v.Fail("listen", "must have a numeric port", c.Listen)
		}
	}
	v.Positive("read_header_timeout", c.ReadHeaderTimeout)
	v.Positive("request_timeout", c.RequestTimeout)
	v.Positive("idle_timeout", c.IdleTimeout)
	v.PositiveInt("max_concurrent", c.MaxConcurrent)
	return v.Err()
}
