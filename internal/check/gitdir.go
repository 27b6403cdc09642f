package check

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// access reports whether the running user may create and remove entries in
// the directory at path (write and search permission, as git needs to add
// objects and update refs). A variable so tests can refuse paths while
// running as root.
var access = func(path string) error {
	return syscall.Access(path, 0x2|0x1) // W_OK|X_OK
}

// gitDirReport is what the recursive check of the git directory found.
type gitDirReport struct {
	dirs     int      // directories checked
	denied   []string // directories the running user cannot write
	complete bool     // false: stopped at the deadline
}

// checkGitDir verifies dir exists, is a directory, accepts a new file, and
// that every directory below it (each <npub>/<identifier>.git and its
// objects and refs) is writable by the running user: git run by the sidecar
// must add objects and refs in repositories another program may have
// created. It stops at ctx's deadline and says so.
func checkGitDir(ctx context.Context, dir string) (*gitDirReport, error) {
	if err := checkWritableDir(dir); err != nil {
		return nil, err
	}
	rep := &gitDirReport{complete: true}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrPermission) {
				rep.denied = append(rep.denied, path)
				return nil
			}
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if ctx.Err() != nil {
			rep.complete = false
			return filepath.SkipAll
		}
		rep.dirs++
		if err := access(path); err != nil {
			rep.denied = append(rep.denied, path)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return rep, nil
}

// deniedProblem describes the unwritable directories in one line.
func (r *gitDirReport) deniedProblem(root string) error {
	first := r.denied[0]
	owner := ""
	if st, err := os.Lstat(first); err == nil {
		if sys, ok := st.Sys().(*syscall.Stat_t); ok {
			owner = fmt.Sprintf(" (owner uid %d, mode %s)", sys.Uid, st.Mode())
		}
	}
	return fmt.Errorf("%d of %d directories under %s are not writable by uid %d, the user grasp-sync runs as, e.g. %s%s: git cannot add objects there; fix the ownership (chown -R %d %s) or run grasp-sync as the owner",
		len(r.denied), r.dirs, root, os.Geteuid(), first, owner, os.Geteuid(), root)
}

// checkWritableDir verifies dir exists, is a directory and accepts a new file.
func checkWritableDir(dir string) error {
	st, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	f, err := os.CreateTemp(dir, ".grasp-sync-check-*")
	if err != nil {
		return fmt.Errorf("%s is not writable: %w", dir, rootCause(err))
	}
	name := f.Name()
	_ = f.Close()
	if err := os.Remove(name); err != nil {
		return fmt.Errorf("remove %s: %w", filepath.Base(name), err)
	}
	return nil
}
