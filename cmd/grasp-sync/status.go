package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/grasp-sync/grasp-sync/internal/config"
	"github.com/grasp-sync/grasp-sync/internal/status"
)

// DefaultStatusTimeout bounds the status request.
const DefaultStatusTimeout = 5 * time.Second

// ErrStatusUnavailable is returned when no sidecar answers /status.
var ErrStatusUnavailable = errors.New("no status from sidecar")

func (e *env) statusCommand() *cli.Command {
	return &cli.Command{
		Name:  "status",
		Usage: "print a running sidecar's status (GET /status) as tables",
		Flags: []cli.Flag{
			&cli.StringFlag{
				Name:    "addr",
				Usage:   "sidecar HTTP address, URL or HOST:PORT (default: derived from --listen)",
				EnvVars: []string{config.EnvPrefix + "STATUS_ADDR"},
			},
			&cli.StringFlag{
				Name:    "listen",
				Usage:   "the sidecar's listen address, used when --addr is not given",
				EnvVars: []string{config.EnvPrefix + "LISTEN"},
				Value:   config.Default().Listen,
			},
			&cli.DurationFlag{
				Name:    "timeout",
				Usage:   "request timeout",
				EnvVars: []string{config.EnvPrefix + "STATUS_TIMEOUT"},
				Value:   DefaultStatusTimeout,
			},
			&cli.BoolFlag{Name: "json", Usage: "print the raw JSON document"},
		},
		Action: e.statusAction,
	}
}

// statusURL turns --addr or --listen into the /status URL. A listen address
// without host, or with a wildcard host, is reached on loopback.
func statusURL(addr, listen string) (string, error) {
	if addr == "" {
		host, port, err := net.SplitHostPort(listen)
		if err != nil {
			return "", fmt.Errorf("--listen %q: %w", listen, err)
		}
		switch host {
		case "", "0.0.0.0", "::":
			host = "127.0.0.1"
		}
		addr = net.JoinHostPort(host, port)
	}
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	return strings.TrimSuffix(addr, "/") + "/status", nil
}

func (e *env) statusAction(c *cli.Context) error {
	u, err := statusURL(c.String("addr"), c.String("listen"))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(c.Context, c.Duration("timeout"))
	defer cancel()
	body, err := fetchStatus(ctx, u)
	if err != nil {
		return err
	}
	if c.Bool("json") {
		_, err := e.stdout.Write(body)
		return err
	}
	var snap status.Snapshot
	if err := json.Unmarshal(body, &snap); err != nil {
		return fmt.Errorf("%w: %s: not a status document: %w", ErrStatusUnavailable, u, err)
	}
	return status.WriteText(e.stdout, &snap, time.Now())
}

func fetchStatus(ctx context.Context, u string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrStatusUnavailable, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %s", ErrStatusUnavailable, u, oneLineCause(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%w: %s: HTTP %d", ErrStatusUnavailable, u, resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrStatusUnavailable, u, err)
	}
	return body, nil
}

// oneLineCause is err on one line, without the url.Error layers that only
// repeat the URL.
func oneLineCause(err error) string {
	var ue *url.Error
	for errors.As(err, &ue) {
		err = ue.Err
	}
	return strings.Join(strings.Fields(err.Error()), " ")
}
