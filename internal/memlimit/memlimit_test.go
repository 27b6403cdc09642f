package memlimit

import (
	"io/fs"
	"math"
	"runtime/debug"
	"testing"
)

func files(m map[string]string) func(string) ([]byte, error) {
	return func(name string) ([]byte, error) {
		if v, ok := m[name]; ok {
			return []byte(v), nil
		}
		return nil, fs.ErrNotExist
	}
}

func TestCgroupLimit(t *testing.T) {
	for _, c := range []struct {
		name  string
		files map[string]string
		want  int64
	}{
		{"none", nil, 0},
		{"v2 own cgroup", map[string]string{
			"/proc/self/cgroup": "0::/system.slice/grasp.service\n",
			"/sys/fs/cgroup/system.slice/grasp.service/memory.max": "536870912\n",
		}, 512 << 20},
		{"v2 namespaced root", map[string]string{
			"/proc/self/cgroup":         "0::/\n",
			"/sys/fs/cgroup/memory.max": "1073741824\n",
		}, 1 << 30},
		{"v2 max", map[string]string{
			"/proc/self/cgroup":         "0::/\n",
			"/sys/fs/cgroup/memory.max": "max\n",
		}, 0},
		{"v1", map[string]string{
			"/proc/self/cgroup": "5:cpu,cpuacct:/\n4:memory:/docker/abc\n0::/\n",
			"/sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes": "268435456\n",
		}, 256 << 20},
		{"v1 unlimited", map[string]string{
			"/proc/self/cgroup":                           "4:memory:/\n",
			"/sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n",
		}, 0},
		{"garbage", map[string]string{
			"/proc/self/cgroup":         "nonsense",
			"/sys/fs/cgroup/memory.max": "lots",
		}, 0},
	} {
		if got := CgroupLimit(files(c.files)); got != c.want {
			t.Errorf("%s: CgroupLimit = %d, want %d", c.name, got, c.want)
		}
	}
}

func TestResolve(t *testing.T) {
	cg := map[string]string{"/proc/self/cgroup": "0::/\n", "/sys/fs/cgroup/memory.max": "1073741824"}
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == "GOMEMLIMIT" {
				return v
			}
			return ""
		}
	}
	for _, c := range []struct {
		name    string
		setting int
		sys     System
		want    int64
		src     string
	}{
		{"setting wins", 200, System{env("1GiB"), files(cg)}, 200 << 20, SourceSetting},
		{"off", -1, System{env(""), files(cg)}, 0, SourceNone},
		{"GOMEMLIMIT", 0, System{env("1GiB"), files(cg)}, 0, SourceGOMEMLIMIT},
		{"cgroup", 0, System{env(""), files(cg)}, 768 << 20, SourceCgroup},
		{"nothing", 0, System{env(""), files(nil)}, 0, SourceNone},
	} {
		got, src := Resolve(c.setting, c.sys)
		if got != c.want || src != c.src {
			t.Errorf("%s: Resolve = %d, %s; want %d, %s", c.name, got, src, c.want, c.src)
		}
	}
}

func TestApply(t *testing.T) {
	old := debug.SetMemoryLimit(-1)
	defer debug.SetMemoryLimit(old)
	if got, src := Apply(300); got != 300<<20 || src != SourceSetting || debug.SetMemoryLimit(-1) != 300<<20 {
		t.Fatalf("Apply(300) = %d, %s", got, src)
	}
	if got, src := Apply(-1); got != math.MaxInt64 || src != SourceNone || debug.SetMemoryLimit(-1) != math.MaxInt64 {
		t.Fatalf("Apply(-1) = %d, %s", got, src)
	}
}
