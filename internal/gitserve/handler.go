package gitserve

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/grasp-sync/grasp-sync/internal/purgatory/gitx"
)

// The smart HTTP services: upload-pack (clone, fetch) is served,
// receive-pack (push) never.
const (
	serviceUpload  = "git-upload-pack"
	serviceReceive = "git-receive-pack"
	// advertiseQuery is the only query of a ref advertisement served.
	advertiseQuery = "service=" + serviceUpload
)

// backendArgs run git http-backend with upload-pack only: the command-line
// settings win over any repository's own config, so no repository can
// turn receive-pack (or the dumb protocol's file access) on. safe.directory
// because the repositories often belong to the relay's user.
var backendArgs = []string{
	"-c", "http.receivepack=false",
	"-c", "http.uploadpack=true",
	"-c", "http.getanyfile=false",
	"-c", "safe.directory=*",
	"-c", "core.hooksPath=/dev/null",
	"http-backend",
}

// waitDelay bounds the wait for a killed backend's pipes.
const waitDelay = 5 * time.Second

// route is a request the server answers with git http-backend.
type route struct {
	// repo is the repository's absolute path (gitx.RepoPath).
	repo string
	// pathInfo is /<npub>/<identifier>.git/<info/refs|git-upload-pack>.
	pathInfo string
	// advertise: GET info/refs (else POST git-upload-pack).
	advertise bool
}

// errNotFound: the path names no repository the server may serve.
var errNotFound = errors.New("not found")

// parsePath reads /<npub>/<identifier>.git/<rest> with the rules the
// sidecar uses for the directory's names: a canonical npub
// (gitx.PubKeyFromNpub) and an identifier gitx.ValidateIdentifier accepts.
// escaped is the path as sent: any percent-encoding (an encoded slash or
// dot) is refused, as no valid name needs one. Nothing touches the
// filesystem.
func parsePath(escaped string) (pub, id, rest string, err error) {
	// rest is one of the two smart HTTP upload-pack requests.
	if !strings.HasPrefix(escaped, "/") || strings.ContainsAny(escaped, "%\\") {
		return "", "", "", errNotFound
	}
	parts := strings.SplitN(escaped[1:], "/", 3)
	if len(parts) != 3 {
		return "", "", "", errNotFound
	}
	if parts[2] != "info/refs" && parts[2] != serviceUpload {
		return "", "", "", errNotFound
	}
	id, ok := strings.CutSuffix(parts[1], ".git")
	if !ok || gitx.ValidateIdentifier(id) != nil {
		return "", "", "", errNotFound
	}
	if pub, err = gitx.PubKeyFromNpub(parts[0]); err != nil {
		return "", "", "", errNotFound
	}
	return pub, id, parts[2], nil
}

// isPush reports whether r asks for receive-pack in any form: its
// advertisement (?service=git-receive-pack) or its POST.
func isPush(r *http.Request) bool {
	if strings.HasSuffix(r.URL.Path, "/"+serviceReceive) || strings.HasSuffix(r.URL.EscapedPath(), "/"+serviceReceive) {
		return true
	}
	for _, v := range r.URL.Query()["service"] {
		if v == serviceReceive {
			return true
		}
	}
	return strings.Contains(r.URL.RawQuery, serviceReceive)
}

// ServeHTTP answers the smart HTTP upload-pack requests of a repository
// in the git directory; a push is 403 before anything else is looked at,
// a path naming no repository 404.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	code, why, result := s.serve(w, r)
	s.m.requests.WithLabelValues(result).Inc()
	if code != 0 {
		http.Error(w, why, code)
		s.log.Debug("git request refused", zap.String("method", r.Method), zap.String("path", r.URL.EscapedPath()),
			zap.Int("code", code), zap.String("why", why))
		return
	}
	s.log.Debug("git request served", zap.String("method", r.Method), zap.String("path", r.URL.EscapedPath()),
		zap.Duration("took", time.Since(start)))
}

// serve answers r, or returns the code and text of a refusal; result
// labels the request in ngit_sync_git_http_requests_total.
func (s *Server) serve(w http.ResponseWriter, r *http.Request) (code int, why, result string) {
	if isPush(r) {
		return http.StatusForbidden, "push is not served: this git server is read-only", resultPush
	}
	rt, code, why := s.route(r)
	if code == http.StatusNotFound {
		return code, why, resultNotFound
	}
	if code != 0 {
		return code, why, resultRefused
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
	defer cancel()
	defer context.AfterFunc(s.stop, cancel)()
	select {
	case s.slots <- struct{}{}:
		defer func() { <-s.slots }()
	case <-ctx.Done():
		return http.StatusServiceUnavailable, "too many git requests at once; try again", resultBusy
	}
	if !s.enter() {
		return http.StatusServiceUnavailable, "shutting down", resultBusy
	}
	defer s.running.Done()
	s.m.running.Inc()
	defer s.m.running.Dec()
	return 0, "", s.backend(ctx, w, r, rt)
}

// route checks r's path, method and query and finds its repository.
func (s *Server) route(r *http.Request) (route, int, string) {
	pub, id, rest, err := parsePath(r.URL.EscapedPath())
	if err != nil {
		return route{}, http.StatusNotFound, "not found"
	}
	var rt route
	switch rest { // parsePath accepts these two only
	case "info/refs":
		if r.Method != http.MethodGet {
			return rt, http.StatusMethodNotAllowed, "method not allowed"
		}
		if r.URL.RawQuery != advertiseQuery {
			return rt, http.StatusForbidden, "only smart HTTP upload-pack (clone, fetch) is served"
		}
		rt.advertise = true
	case serviceUpload:
		if r.Method != http.MethodPost {
			return rt, http.StatusMethodNotAllowed, "method not allowed"
		}
		if r.URL.RawQuery != "" {
			return rt, http.StatusNotFound, "not found"
		}
	}
	repo, err := gitx.RepoPath(s.root, pub, id)
	if err != nil || !s.isRepo(repo) {
		return rt, http.StatusNotFound, "not found"
	}
	npub, err := gitx.Npub(pub)
	if err != nil {
		return rt, http.StatusNotFound, "not found"
	}
	rt.repo, rt.pathInfo = repo, "/"+npub+"/"+id+".git/"+rest
	return rt, 0, ""
}

// backend runs git http-backend for rt as a CGI program: the request's
// body is its input, its output the response (headers, then the body,
// streamed). ctx bounds it: the process is killed when it ends. It
// returns the request's result label.
func (s *Server) backend(ctx context.Context, w http.ResponseWriter, r *http.Request, rt route) string {
	cmd := exec.CommandContext(ctx, s.git, backendArgs...)
	killGroup(cmd)
	cmd.Dir = rt.repo
	cmd.Env = s.env(r, rt)
	cmd.WaitDelay = waitDelay
	if !rt.advertise {
		cmd.Stdin = r.Body
	}
	// At the deadline the connection's reads and writes fail at once too:
	// a client that stalls its request or stops reading the answer holds
	// neither this handler nor its connection.
	var mu sync.Mutex
	finished := false
	rc := http.NewResponseController(w)
	stopDeadline := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		if !finished {
			_ = rc.SetReadDeadline(time.Unix(1, 0))
			_ = rc.SetWriteDeadline(time.Unix(1, 0))
		}
	})
	defer func() {
		stopDeadline()
		mu.Lock()
		finished = true
		mu.Unlock()
	}()
	stderr := &tail{max: 2048}
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		http.Error(w, "internal error", http.StatusInternalServerError)
		return resultFailed
	}
	if err := cmd.Start(); err != nil {
		s.log.Warn("git http-backend did not start", zap.Error(err))
		http.Error(w, "internal error", http.StatusInternalServerError)
		return resultFailed
	}
	br := bufio.NewReaderSize(out, 32<<10)
	hdr, err := textproto.NewReader(br).ReadMIMEHeader()
	if err != nil {
		_ = cmd.Cancel()
		_ = cmd.Wait()
		s.log.Warn("git http-backend answered no headers", zap.String("repo", rt.pathInfo),
			zap.Error(err), zap.String("stderr", stderr.String()))
		http.Error(w, "bad gateway", http.StatusBadGateway)
		return resultFailed
	}
	code := http.StatusOK
	if st := hdr.Get("Status"); st != "" {
		if n, err := strconv.Atoi(strings.SplitN(st, " ", 2)[0]); err == nil && n >= 100 && n <= 599 {
			code = n
		}
		hdr.Del("Status")
	}
	for k, vs := range hdr {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.WriteHeader(code)
	copyErr := copyFlushing(w, br)
	if copyErr != nil {
		_ = cmd.Cancel()
	}
	waitErr := cmd.Wait()
	switch {
	case ctx.Err() != nil && errors.Is(context.Cause(ctx), context.DeadlineExceeded):
		s.log.Warn("git request stopped after git_http.request_timeout", zap.String("repo", rt.pathInfo),
			zap.Duration("timeout", s.cfg.RequestTimeout), zap.String("remote", r.RemoteAddr))
		return resultTimeout
	case waitErr != nil && copyErr == nil && ctx.Err() == nil:
		s.log.Debug("git http-backend failed", zap.String("repo", rt.pathInfo), zap.Error(waitErr),
			zap.String("stderr", stderr.String()))
		return resultFailed
	case copyErr != nil || ctx.Err() != nil:
		return resultAborted
	}
	return resultServed
}

// env is the backend's CGI environment: git's clean environment, the
// repository root and the request variables http-backend reads, nothing
// else of the request's headers.
func (s *Server) env(r *http.Request, rt route) []string {
	env := append(gitx.CleanEnv(),
		"GIT_PROJECT_ROOT="+s.root,
		"GIT_HTTP_EXPORT_ALL=1",
		"GATEWAY_INTERFACE=CGI/1.1",
		"SERVER_PROTOCOL=HTTP/1.1",
		"REQUEST_METHOD="+r.Method,
		"PATH_INFO="+rt.pathInfo,
	)
	if rt.advertise {
		env = append(env, "QUERY_STRING="+advertiseQuery)
	} else {
		env = append(env, "QUERY_STRING=")
		if r.ContentLength >= 0 {
			env = append(env, "CONTENT_LENGTH="+strconv.FormatInt(r.ContentLength, 10))
		}
		if ct := r.Header.Get("Content-Type"); ct != "" {
			env = append(env, "CONTENT_TYPE="+ct)
		}
		if ce := r.Header.Get("Content-Encoding"); ce != "" {
			env = append(env, "HTTP_CONTENT_ENCODING="+ce)
		}
	}
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		env = append(env, "REMOTE_ADDR="+host)
	}
	if p := r.Header.Get("Git-Protocol"); validProtocol(p) {
		env = append(env, "GIT_PROTOCOL="+p)
	}
	return env
}

// validProtocol accepts a Git-Protocol header of git's form
// (version=2, key=value pairs joined by ':').
func validProtocol(p string) bool {
	if p == "" || len(p) > 256 {
		return false
	}
	for i := 0; i < len(p); i++ {
		c := p[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("=:._-", c) >= 0) {
			return false
		}
	}
	return true
}

// copyFlushing copies the backend's output to w, flushing each piece so a
// clone sees git's progress and keep-alives as they come.
func copyFlushing(w http.ResponseWriter, src io.Reader) error {
	rc := http.NewResponseController(w)
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return werr
			}
			if ferr := rc.Flush(); ferr != nil {
				return ferr
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// tail keeps the last max bytes written to it (a backend's stderr).
type tail struct {
	max int
	b   []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = t.b[over:]
	}
	return len(p), nil
}

func (t *tail) String() string { return strings.TrimSpace(string(t.b)) }
