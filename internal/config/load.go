package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"gopkg.in/yaml.v3"
)

// ErrConfigFile wraps every failure to read or decode a configuration file.
var ErrConfigFile = errors.New("config file")

// Parse decodes YAML from r over the defaults. Unknown keys are refused.
// An empty document yields the defaults.
func Parse(r io.Reader) (*Config, error) {
	cfg := Default()
	if err := decodeInto(cfg, r); err != nil {
		return nil, err
	}
	return cfg, nil
}

// decodeInto decodes one YAML document over cfg. A second document in the
// same file is refused.
func decodeInto(cfg *Config, r io.Reader) error {
	dec := yaml.NewDecoder(r)
	dec.KnownFields(true)
	err := dec.Decode(cfg)
	if errors.Is(err, io.EOF) {
		return nil
	}
	if err == nil {
		var extra yaml.Node
		if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
			return fmt.Errorf("%w: more than one YAML document", ErrConfigFile)
		}
		return nil
	}
	var te *yaml.TypeError
	if errors.As(err, &te) {
		return fmt.Errorf("%w: %s", ErrConfigFile, strings.Join(te.Errors, "; "))
	}
	return fmt.Errorf("%w: %s", ErrConfigFile, strings.TrimPrefix(err.Error(), "yaml: "))
}

// LoadFile returns the defaults overlaid with the YAML file at path (no
// environment, no validation). An empty path yields the defaults.
func LoadFile(path string) (*Config, error) {
	if path == "" {
		return Default(), nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfigFile, err)
	}
	cfg, err := Parse(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, nil
}

// Load builds a complete configuration without command-line flags:
// defaults, the YAML file at path (if not empty), the GRASP_SYNC_*
// environment, the secret key, then Validate.
func Load(path string) (*Config, error) {
	cfg, err := LoadFile(path)
	if err != nil {
		return nil, err
	}
	if err := ApplyEnv(cfg, os.LookupEnv); err != nil {
		return nil, err
	}
	if err := cfg.ResolveKey(os.LookupEnv); err != nil {
		return nil, err
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return cfg, nil
}

// ResolveKey loads Auth.Key from the environment variable GRASP_SYNC_AUTH_KEY
// or from Auth.KeyFile. Giving both is an error. Errors never contain the
// key material.
func (c *Config) ResolveKey(lookup func(string) (string, bool)) error {
	envKey, hasEnv := lookup(EnvAuthKey)
	hasEnv = hasEnv && strings.TrimSpace(envKey) != ""
	switch {
	case hasEnv && c.Auth.KeyFile != "":
		return named(&ValidationError{Field: "auth.key_file", Problem: "must be empty when " + EnvAuthKey + " is set", Value: c.Auth.KeyFile})
	case hasEnv:
		k, err := ParseSecretKey(envKey)
		if err != nil {
			return fmt.Errorf("%s: %w", EnvAuthKey, err)
		}
		c.Auth.Key = k
	case c.Auth.KeyFile != "":
		b, err := os.ReadFile(c.Auth.KeyFile)
		if err != nil {
			return fmt.Errorf("auth.key_file: %w", err)
		}
		k, err := ParseSecretKey(string(b))
		if err != nil {
			return fmt.Errorf("auth.key_file: %s: %w", c.Auth.KeyFile, err)
		}
		c.Auth.Key = k
	}
	return nil
}

// YAML renders c as a YAML document that Parse reads back to the
// same value (the secret key is omitted).
func (c *Config) YAML() ([]byte, error) {
	return yaml.Marshal(c)
}
