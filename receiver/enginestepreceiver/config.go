// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package enginestepreceiver // import "github.com/inferprof/inferprof/receiver/enginestepreceiver"

import (
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"

	"github.com/inferprof/inferprof/internal/confdur"
	"github.com/inferprof/inferprof/internal/unixsock"
)

// DefaultEndpoint is where the Python hook sends unless
// INFERPROF_STEP_ENDPOINT says otherwise (internal/unixsock holds it).
const DefaultEndpoint = unixsock.DefaultStepEndpoint

// Bounds of poll_interval: below 100µs the collector spins; above 1s a
// stock kernel's 10-datagram queue overflows at 10 steps a second.
const (
	minPollInterval = 100 * time.Microsecond
	maxPollInterval = time.Second
)

// maxSocketPath is the size of sun_path less its terminating NUL on Linux.
const maxSocketPath = 107

// Config is the engine_step receiver's YAML configuration.
type Config struct {
	// Endpoint is the Unix datagram socket path the hook sends to. Default
	// /tmp/inferprof/engine-step.sock. A missing folder is created 0700 and
	// the socket is made 0600, so only the collector's user (or root) can
	// send. Must be an absolute path of at most 107 bytes.
	Endpoint string `mapstructure:"endpoint"`
	// ReadBufferSize is the socket receive buffer in bytes (SO_RCVBUF); the
	// kernel caps it at net.core.rmem_max. Default 4 MiB; 0 keeps the
	// system default.
	ReadBufferSize int `mapstructure:"read_buffer_size"`
	// PollInterval is how often the receiver empties the socket while
	// steps flow. It does not wait on the socket then, so a hook's send
	// never has to wake the collector: that wake-up runs on the engine's
	// thread and costs more than the hook's own work. The kernel queues
	// net.unix.max_dgram_qlen datagrams (10 on a stock kernel) between
	// polls, so the default 2ms keeps up with 5,000 steps a second.
	// Between 100µs and 1s.
	PollInterval time.Duration `mapstructure:"poll_interval"`
	// StepStore names the step_store extension that executor workers'
	// launch marks go to, for the cupti receiver's correlation. Unset:
	// marks are counted and dropped.
	StepStore *component.ID `mapstructure:"step_store"`
	_         struct{}
}

var _ component.Config = (*Config)(nil)

// Unmarshal decodes the configuration; a value that is not a duration is
// named in the error along with its key (internal/confdur).
func (c *Config) Unmarshal(conf *confmap.Conf) error { return confdur.Unmarshal(conf, c) }

func createDefaultConfig() component.Config {
	return &Config{
		Endpoint:       DefaultEndpoint,
		ReadBufferSize: 4 << 20,
		PollInterval:   2 * time.Millisecond,
	}
}

// Validate checks the configuration.
func (c *Config) Validate() error {
	var errs []error
	switch {
	case c.Endpoint == "":
		errs = append(errs, errors.New("endpoint: must be set to a Unix socket path"))
	case !filepath.IsAbs(c.Endpoint):
		errs = append(errs, fmt.Errorf("endpoint %q: must be an absolute socket path", c.Endpoint))
	case len(c.Endpoint) > maxSocketPath:
		errs = append(errs, fmt.Errorf("endpoint %q: longer than %d bytes, the Unix socket path limit", c.Endpoint, maxSocketPath))
	}
	if c.PollInterval < minPollInterval || c.PollInterval > maxPollInterval {
		errs = append(errs, fmt.Errorf("poll_interval %s: must be between %s and %s", c.PollInterval, minPollInterval, maxPollInterval))
	}
	if c.ReadBufferSize < 0 {
		errs = append(errs, fmt.Errorf("read_buffer_size %d: must not be negative", c.ReadBufferSize))
	}
	return errors.Join(errs...)
}
