// Package statestore keeps the sidecar's sync state (the LocalIndex, the
// purgatory's held events, per-relay state) in one bbolt file under the state
// directory, so a restart resumes where the last run stopped.
package statestore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	bolt "go.etcd.io/bbolt"
	"go.uber.org/zap"

	"github.com/grasp-sync/grasp-sync/internal/clock"
	"github.com/grasp-sync/grasp-sync/internal/setting"
)

// FormatVersion is the layout of the store's buckets and values. A store
// of another version is set aside, not read. 2: the heads bucket holds the
// current announcements and states, one key per event id.
const FormatVersion = 2

// FileName is the store's file inside the state directory.
const FileName = "state.db"

var (
	bucketMeta      = []byte("meta")
	bucketLocal     = []byte("local")
	bucketPurgatory = []byte("purgatory")
	bucketRelays    = []byte("relays")
	bucketRepos     = []byte("repos")
	bucketHealth    = []byte("health")
	bucketRejected  = []byte("rejected")
	bucketHeads     = []byte("heads")

	keyFormat   = []byte("format")
	keyOwnRelay = []byte("own_relay")
	keyCreated  = []byte("created")
)

// ErrLocked: another process holds the store.
var ErrLocked = errors.New("statestore: the state file is in use by another process")

// Config is the configuration's state section: each setting carries its
// YAML key and help text (flag, environment variable and documentation
// are derived from them). Open reads all but FlushInterval, which paces
// Run.
type Config struct {
	// Dir is the state directory; created when missing.
	Dir string `yaml:"dir" flag:"state-dir" help:"Directory of the sync state store (one bbolt file: the local index, purgatory's held events). Empty: memory only, every restart reads the own relay again and held events are lost. Give each own relay its own directory."`
	// FlushInterval is the interval of Run's batched writes.
	FlushInterval time.Duration `yaml:"flush_interval" help:"Interval between batched writes of the sync state (what changed since the last one, in one transaction)."`
	// Heartbeat bounds how often timestamps alone (a relay last seen up,
	// the own relay read until now) are written (DefaultHeartbeat when 0).
	Heartbeat time.Duration `yaml:"heartbeat" help:"Longest interval between writes of timestamps alone (a relay last seen up, how far the own relay was read), so an idle sidecar does not commit every flush_interval."`
	// RejectedInterval bounds how often the RejectedIndex (up to a million
	// ids) is rewritten (DefaultRejectedInterval when 0).
	RejectedInterval time.Duration `yaml:"rejected_interval" help:"Shortest interval between rewrites of the rejected index (up to a million ids) while it changes; it is always written at shutdown."`
	// UsageInterval bounds how often a flush walks the buckets for
	// Stats.InUse (DefaultUsageInterval when 0).
	UsageInterval time.Duration `yaml:"usage_interval" help:"Shortest interval between walks of the store for the bytes in use per part (status, metrics)."`
	// LockTimeout bounds the wait for another process's lock
	// (DefaultLockTimeout when 0).
	LockTimeout time.Duration `yaml:"lock_timeout" help:"How long start-up waits for another process's lock on the state file before giving up."`
}

// DefaultConfig returns the defaults (Dir empty: memory only).
func DefaultConfig() Config {
	return Config{
		FlushInterval: DefaultFlushInterval, Heartbeat: DefaultHeartbeat,
		RejectedInterval: DefaultRejectedInterval, UsageInterval: DefaultUsageInterval,
		LockTimeout: DefaultLockTimeout,
	}
}

// Validate reports every invalid setting, each as a *setting.Error keyed
// by its YAML key.
func (c Config) Validate() error {
	v := setting.Checks{}
	v.Positive("flush_interval", c.FlushInterval)
	v.Positive("heartbeat", c.Heartbeat)
	v.Positive("rejected_interval", c.RejectedInterval)
	v.Positive("usage_interval", c.UsageInterval)
	v.Positive("lock_timeout", c.LockTimeout)
	return v.Err()
}

// Options configure Open: the state section's settings, and what the
// process gives.
type Options struct {
	Config
	// OwnRelay identifies the store: a store made for another own relay is
	// set aside. Compare normalized URLs.
	OwnRelay string
	// NoSync skips fsync on commit (tests only).
	NoSync bool
	Log    *zap.Logger
	// Registerer, when set, receives the store's metrics.
	Registerer prometheus.Registerer
	// Clock runs the flush interval and, unless Now is set, tells the
	// time (default the real clock).
	Clock clock.Clock
	// Now is the wall clock (default Clock.Now).
	Now func() time.Time
}

// Outcome tells how Open found the state directory.
type Outcome string

// Outcomes of Open.
const (
	Fresh      Outcome = "fresh"       // no store yet: created
	Resumed    Outcome = "resumed"     // the store was opened as it is
	OtherRelay Outcome = "other-relay" // made for another own relay: set aside, new store
	OldFormat  Outcome = "old-format"  // another format version: set aside, new store
	Corrupt    Outcome = "corrupt"     // unreadable or truncated: set aside, new store
	MemoryOnly Outcome = "memory-only" // no state directory configured
)

// Store is an open state store.
type Store struct {
	db      *bolt.DB
	path    string
	opt     Options
	log     *zap.Logger
	m       *metrics
	outcome Outcome
	aside   string
	wr      *writer
}

// Open opens or creates the store in opt.Dir. A store of another format
// version or another own relay, or one that cannot be read, is renamed
// aside (one log line says which and where) and a new one is created: the
// sidecar then rebuilds its state from the relays.
func Open(opt Options) (*Store, error) {
	if opt.Dir == "" {
		return nil, errors.New("statestore: no state directory")
	}
	if opt.Log == nil {
		opt.Log = zap.NewNop()
	}
	if opt.LockTimeout <= 0 {
		opt.LockTimeout = DefaultLockTimeout
	}
	if opt.Heartbeat <= 0 {
		opt.Heartbeat = DefaultHeartbeat
	}
	if opt.RejectedInterval <= 0 {
		opt.RejectedInterval = DefaultRejectedInterval
	}
	if opt.UsageInterval <= 0 {
		opt.UsageInterval = DefaultUsageInterval
	}
	if opt.Clock == nil {
		opt.Clock = clock.Real{}
	}
	if opt.Now == nil {
		opt.Now = opt.Clock.Now
	}
	if err := os.MkdirAll(opt.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("statestore: state directory: %w", err)
	}
	m, err := newMetrics(opt.Registerer)
	if err != nil {
		return nil, err
	}
	s := &Store{path: filepath.Join(opt.Dir, FileName), opt: opt, log: opt.Log, m: m, wr: &writer{}}
	_, statErr := os.Stat(s.path)
	existed := statErr == nil

	if existed {
		if err := precheck(s.path); err != nil {
			if err := s.setAside("corrupt", err); err != nil {
				return nil, err
			}
			s.outcome = Corrupt
		}
	}
	if err := s.open(); err != nil {
		if errors.Is(err, ErrLocked) {
			return nil, err
		}
		if err := s.setAside("corrupt", err); err != nil {
			return nil, err
		}
		s.outcome = Corrupt
		if err := s.open(); err != nil {
			return nil, err
		}
	}
	if s.outcome == "" && !existed {
		opt.Log.Info("state store created", zap.String("path", s.path))
		s.outcome = Fresh
	}
	if s.outcome == "" {
		why, outcome := s.identity()
		if why != nil {
			s.db.Close()
			if err := s.setAside(string(outcome), why); err != nil {
				return nil, err
			}
			s.outcome = outcome
			if err := s.open(); err != nil {
				return nil, err
			}
		} else {
			s.outcome = Resumed
		}
	}
	if err := s.initMeta(); err != nil {
		s.db.Close()
		return nil, err
	}
	s.refreshSize()
	s.refreshUsage(s.wr)
	return s, nil
}

func (s *Store) open() error {
	db, err := bolt.Open(s.path, 0o600, &bolt.Options{Timeout: s.opt.LockTimeout, NoSync: s.opt.NoSync})
	if err != nil {
		if errors.Is(err, bolt.ErrTimeout) {
			return fmt.Errorf("%w: %s", ErrLocked, s.path)
		}
		return err
	}
	s.db = db
	return nil
}

// identity checks the store's format version and own relay.
func (s *Store) identity() (error, Outcome) {
	var why error
	outcome := Resumed
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketMeta)
		if b == nil {
			why, outcome = errors.New("no format version recorded"), OldFormat
			return nil
		}
		v := b.Get(keyFormat)
		if len(v) != 4 || binary.BigEndian.Uint32(v) != FormatVersion {
			ver := "none"
			if len(v) == 4 {
				ver = fmt.Sprint(binary.BigEndian.Uint32(v))
			}
			why, outcome = fmt.Errorf("format version %s, this build reads %d", ver, FormatVersion), OldFormat
			return nil
		}
		if own := string(b.Get(keyOwnRelay)); own != s.opt.OwnRelay {
			why, outcome = fmt.Errorf("made for own relay %q, this sidecar serves %q", own, s.opt.OwnRelay), OtherRelay
		}
		return nil
	})
	if err != nil {
		return err, Corrupt
	}
	return why, outcome
}

// setAside renames the store file to <file>.<reason>-<time>, logging one
// line that says why and where it went.
func (s *Store) setAside(reason string, why error) error {
	if s.db != nil {
		s.db.Close()
		s.db = nil
	}
	aside := fmt.Sprintf("%s.%s-%s", s.path, reason, s.opt.Now().UTC().Format("20060102T150405Z"))
	if err := os.Rename(s.path, aside); err != nil {
		return fmt.Errorf("statestore: setting aside %s: %w", s.path, err)
	}
	s.aside = aside
	msg := "state store set aside; starting a new one and rebuilding the state from the relays"
	if reason == "corrupt" {
		s.log.Warn(msg, zap.String("reason", reason), zap.String("moved_to", aside), zap.Error(why))
	} else {
		s.log.Info(msg, zap.String("reason", reason), zap.String("moved_to", aside), zap.Error(why))
	}
	return nil
}

func (s *Store) initMeta() error {
	return s.db.Update(func(tx *bolt.Tx) error {
		for _, name := range [][]byte{bucketLocal, bucketPurgatory, bucketRelays, bucketRepos, bucketHealth, bucketRejected, bucketHeads} {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		b, err := tx.CreateBucketIfNotExists(bucketMeta)
		if err != nil {
			return err
		}
		if b.Get(keyFormat) != nil {
			return nil
		}
		if err := b.Put(keyFormat, binary.BigEndian.AppendUint32(nil, FormatVersion)); err != nil {
			return err
		}
		if err := b.Put(keyOwnRelay, []byte(s.opt.OwnRelay)); err != nil {
			return err
		}
		return b.Put(keyCreated, []byte(s.opt.Now().UTC().Format(time.RFC3339)))
	})
}

// Outcome tells how Open found the directory.
func (s *Store) Outcome() Outcome { return s.outcome }

// SetAside is where the previous store was moved, when it was.
func (s *Store) SetAside() string { return s.aside }

// Path is the store file.
func (s *Store) Path() string { return s.path }

// Close closes the store.
func (s *Store) Close() error {
	if s.db == nil {
		return nil
	}
	err := s.db.Close()
	s.db = nil
	return err
}

// Bytes is the store file's size.
func (s *Store) Bytes() int64 {
	fi, err := os.Stat(s.path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

func (s *Store) refreshSize() { s.m.bytes.Set(float64(s.Bytes())) }

// IsSetAside reports whether name is a store file set aside by Open.
func IsSetAside(name string) bool {
	return strings.HasPrefix(name, FileName+".")
}
