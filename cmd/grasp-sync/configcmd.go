package main

import (
	"os"

	"github.com/urfave/cli/v2"

	"github.com/grasp-sync/grasp-sync/internal/config"
)

func (e *env) configCommand() *cli.Command {
	return &cli.Command{
		Name:  "config",
		Usage: "print the effective configuration as YAML (with where each value came from)",
		Description: "Loads and validates the configuration exactly as run does and prints it as a YAML\n" +
			"document that --config accepts back unchanged: durations with units, the secret key\n" +
			"never printed, a comment on each setting naming its source (default, file, env, flag).",
		Flags:  config.Flags(),
		Action: e.configAction,
	}
}

func (e *env) configAction(c *cli.Context) error {
	cfg, err := config.FromCLI(c)
	if err != nil {
		return err
	}
	path := c.String(config.FlagConfig)
	file, err := config.LoadFile(path)
	if err != nil {
		return err
	}
	var header []string
	header = append(header, "grasp-sync effective configuration; comments say where each value came from.")
	if path != "" {
		header = append(header, "file: "+path)
	}
	if !cfg.Auth.Key.IsZero() {
		src := "auth.key_file"
		if v, ok := os.LookupEnv(config.EnvAuthKey); ok && v != "" {
			src = config.EnvAuthKey
		}
		header = append(header, "auth key: loaded from "+src+" (redacted; never printed)")
	}
	e.typosReported = true
	for _, typo := range e.envTypos(c.App.Commands) {
		header = append(header, "warning: "+typo.String())
	}
	source := func(s config.Setting) string {
		return config.SourceOf(s, e.args, os.LookupEnv, file)
	}
	b, err := cfg.AnnotatedYAML(source, header)
	if err != nil {
		return err
	}
	_, err = e.stdout.Write(b)
	return err
}
