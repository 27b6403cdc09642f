package config

import (
	"os"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// The shipped deployment examples must stay loadable: their settings and
// environment variable names are checked against this package.

func knownEnv(name string) bool {
	if name == EnvConfig || name == EnvAuthKey {
		return true
	}
	for _, s := range Settings() {
		if s.Env == name {
			return true
		}
	}
	return false
}

func TestDockerComposeEnvironment(t *testing.T) {
	b, err := os.ReadFile("../../deploy/docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var compose struct {
		Services map[string]struct {
			Environment map[string]string `yaml:"environment"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(b, &compose); err != nil {
		t.Fatal(err)
	}
	env := compose.Services["grasp-sync"].Environment
	if len(env) == 0 {
		t.Fatal("no grasp-sync service environment")
	}
	for k, v := range env {
		if !knownEnv(k) {
			t.Errorf("unknown variable %s", k)
		}
		// ${GRASP_DOMAIN:-git.example.com} → its default.
		if i := strings.Index(v, ":-"); strings.HasPrefix(v, "${") && i > 0 {
			env[k] = strings.TrimSuffix(v[i+2:], "}")
		}
	}
	// Commented-out variables must be known too.
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "#"))
		if name, _, ok := strings.Cut(line, ":"); ok && strings.HasPrefix(name, EnvPrefix) && !knownEnv(name) {
			t.Errorf("unknown variable %s in a comment", name)
		}
	}
	cfg := Default()
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	if err := ApplyEnv(cfg, lookup); err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("compose configuration invalid: %v", err)
	}
	if cfg.GitDir != "/srv/git" || len(cfg.BootstrapRelays) != 2 {
		t.Errorf("unexpected compose configuration: %+v", cfg)
	}
}

func TestKubernetesConfigMap(t *testing.T) {
	b, err := os.ReadFile("../../deploy/kubernetes/configmap.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cm struct {
		Data map[string]string `yaml:"data"`
	}
	if err := yaml.Unmarshal(b, &cm); err != nil {
		t.Fatal(err)
	}
	cfg, err := Parse(strings.NewReader(cm.Data["grasp-sync.yml"]))
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("ConfigMap configuration invalid: %v", err)
	}
	strfry, err := os.ReadFile("../../deploy/strfry.conf")
	if err != nil {
		t.Fatal(err)
	}
	if cm.Data["strfry.conf"] != string(strfry) {
		t.Error("ConfigMap strfry.conf differs from deploy/strfry.conf")
	}

	d, err := os.ReadFile("../../deploy/kubernetes/deployment.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(d), "\n") {
		line = strings.TrimSpace(line)
		if name, ok := strings.CutPrefix(line, "- name: "); ok && strings.HasPrefix(name, EnvPrefix) && !knownEnv(name) {
			t.Errorf("deployment.yaml: unknown variable %s", name)
		}
	}
}
