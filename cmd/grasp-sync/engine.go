package main

import (
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/grasp-sync/grasp-sync/internal/config"
	"github.com/grasp-sync/grasp-sync/internal/sidecar"
	"github.com/grasp-sync/grasp-sync/internal/version"
)

// newSidecarEngine is the production engineFactory.
func newSidecarEngine(cfg *config.Config, log *zap.Logger, reg prometheus.Registerer) (Engine, error) {
	sc, err := sidecar.New(cfg, sidecar.Deps{Log: log, Registry: reg, Version: version.Get().Version})
	if err != nil {
		return nil, err
	}
	return sc, nil
}
