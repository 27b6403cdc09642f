package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"time"
)

// strfrySync copies every remote's events into a fresh own strfry with
// strfry's own `strfry sync URL --dir down` (NIP-77, one process per
// remote, concurrently, as the baseline copies), and reports the
// processes' CPU time and the largest resident set among them.
func (w *world) strfrySync(ctx context.Context, opts Options) (Result, error) {
	res := Result{Name: RunStrfrySync, Note: "strfry sync --dir down, one process per remote"}
	own, err := w.newOwn()
	if err != nil {
		return res, err
	}
	defer own.Close()
	sf, ok := own.node.(strfryNode)
	if !ok {
		return res, fmt.Errorf("bench: run %s needs strfry relays", RunStrfrySync)
	}
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	start := time.Now()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for _, r := range w.remotes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := sf.Command(ctx, "sync", r.URL(), "--dir", "down")
			out, err := cmd.CombinedOutput()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("bench: strfry sync %s: %w: %s", r.URL(), err, tail(out)))
			}
			if st := cmd.ProcessState; st != nil {
				res.CPUSeconds += (st.UserTime() + st.SystemTime()).Seconds()
				if ru, ok := st.SysUsage().(*syscall.Rusage); ok {
					res.PeakRSSBytes = max(res.PeakRSSBytes, ru.Maxrss*1024)
				}
			}
		}()
	}
	wg.Wait()
	res.Seconds = time.Since(start).Seconds()
	res.Events = own.gained(w)
	err = errors.Join(errs...)
	res.Converged = err == nil && res.Events == len(w.rest)
	if err == nil && !res.Converged {
		err = fmt.Errorf("%w: own relay took %d of %d events", ErrNotConverged, res.Events, len(w.rest))
	}
	return res, err
}

// tail is the end of a command's output, for an error message.
func tail(out []byte) string {
	const n = 400
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return string(out)
}
