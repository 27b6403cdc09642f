package config

import (
	"fmt"
	"os"
	"time"

	"github.com/urfave/cli/v2"
)

// FlagConfig is the name of the flag that names the YAML file.
const FlagConfig = "config"

// Flags returns a fresh set of urfave/cli flags: --config plus one flag per
// setting, each with its GRASP_SYNC_* environment twin. Call it once per
// command: urfave flags carry parse state.
func Flags() []cli.Flag {
	def := Default()
	flags := []cli.Flag{
		&cli.StringFlag{
			Name:    FlagConfig,
			Usage:   "YAML configuration `FILE` (unknown keys are refused)",
			EnvVars: []string{EnvConfig},
		},
	}
	for _, s := range settings {
		flags = append(flags, s.cliFlag(def))
	}
	return flags
}

func (s Setting) cliFlag(def *Config) cli.Flag {
	usage := s.Help
	defText := s.Format(def)
	env := []string{s.Env}
	cat := s.Group
	switch s.Kind {
	case KindString:
		return &cli.StringFlag{Name: s.Flag, Usage: usage, EnvVars: env, DefaultText: defText, Category: cat}
	case KindStrings:
		return &cli.StringSliceFlag{Name: s.Flag, Usage: usage + " (repeatable; comma-separated in the environment)", EnvVars: env, DefaultText: defText, Category: cat}
	case KindInt:
		return &cli.IntFlag{Name: s.Flag, Usage: usage, EnvVars: env, DefaultText: defText, Category: cat}
	case KindInts:
		return &cli.IntSliceFlag{Name: s.Flag, Usage: usage + " (repeatable or comma-separated)", EnvVars: env, DefaultText: defText, Category: cat}
	case KindFloat:
		return &cli.Float64Flag{Name: s.Flag, Usage: usage, EnvVars: env, DefaultText: defText, Category: cat}
	case KindBool:
		return &cli.BoolFlag{Name: s.Flag, Usage: usage, EnvVars: env, DefaultText: defText, Category: cat}
	case KindDuration:
		return &cli.DurationFlag{Name: s.Flag, Usage: usage + " (duration with unit: 500ms, 5s, 2m, 1h)", EnvVars: env, DefaultText: defText, Category: cat}
	case KindDurations:
		return &cli.StringSliceFlag{Name: s.Flag, Usage: usage + " (durations with unit; repeatable or comma-separated)", EnvVars: env, DefaultText: defText, Category: cat}
	}
	panic("config: no flag for kind " + string(s.Kind))
}

// FromCLI builds the configuration for a command whose flags came from
// Flags: defaults, the --config file, then every flag the user set either
// on the command line or through its environment twin (urfave/cli gives the
// command line precedence), then the secret key and Validate.
func FromCLI(c *cli.Context) (*Config, error) {
	cfg, err := LoadFile(c.String(FlagConfig))
	if err != nil {
		return nil, err
	}
	if err := ApplyCLI(cfg, c); err != nil {
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

// ApplyCLI overlays onto cfg every setting whose flag is set in c (on the
// command line or by its environment variable).
func ApplyCLI(cfg *Config, c *cli.Context) error {
	for _, s := range settings {
		if !c.IsSet(s.Flag) {
			continue
		}
		var v any
		switch s.Kind {
		case KindString:
			v = c.String(s.Flag)
		case KindStrings:
			v = nonNil(c.StringSlice(s.Flag))
		case KindInt:
			v = c.Int(s.Flag)
		case KindInts:
			v = nonNilInts(c.IntSlice(s.Flag))
		case KindFloat:
			v = c.Float64(s.Flag)
		case KindBool:
			v = c.Bool(s.Flag)
		case KindDuration:
			v = c.Duration(s.Flag)
		case KindDurations:
			ds := []time.Duration{}
			for _, p := range c.StringSlice(s.Flag) {
				for _, q := range splitList(p) {
					d, err := time.ParseDuration(q)
					if err != nil {
						return fmt.Errorf("%s (--%s, %s): invalid duration %q (use units, e.g. 5s, 2m, 1h)", s.Key, s.Flag, s.Env, q)
					}
					ds = append(ds, d)
				}
			}
			v = ds
		}
		if err := s.Set(cfg, v); err != nil {
			return err
		}
	}
	return nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func nonNilInts(s []int) []int {
	if s == nil {
		return []int{}
	}
	return s
}
