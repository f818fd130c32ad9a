// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package confstrict

import (
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/confmap"
)

// cfg is shaped like the graphsignal exporter's: a squashed client, a
// nested server and a section of our own.
type cfg struct {
	Client confighttp.ClientConfig `mapstructure:",squash"`
	Local  confighttp.ServerConfig `mapstructure:"local"`
	Own    struct {
		Wait time.Duration `mapstructure:"wait"`
	} `mapstructure:"own"`
	APIKey string `mapstructure:"api_key"`

	_ struct{}
}

func newCfg() *cfg {
	return &cfg{Client: confighttp.NewDefaultClientConfig(), Local: confighttp.NewDefaultServerConfig()}
}

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name string
		conf map[string]any
		want string // "" for accepted
	}{
		{"known keys", map[string]any{
			"endpoint": "https://x", "timeout": "3s", "tls": map[string]any{"insecure": true},
			"local": map[string]any{"endpoint": "127.0.0.1:1"}, "own": map[string]any{"wait": "1s"}, "api_key": "k",
		}, ""},
		{"deprecated client key still known", map[string]any{"max_idle_conns": 5}, ""},
		{"top level", map[string]any{"local_endpoint": "127.0.0.1:1"}, "'confstrict.cfg' has invalid keys: local_endpoint"},
		{"in the squashed client", map[string]any{"tls": map[string]any{"insecur": true}}, "'tls' has invalid keys: insecur"},
		{"in the nested server", map[string]any{"local": map[string]any{"endpont": "x"}}, "'local' has invalid keys: endpont"},
		{"in our own section", map[string]any{"own": map[string]any{"wiat": "1s"}}, "'own' has invalid keys: wiat"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conf := confmap.NewFromStringMap(tc.conf)
			c := newCfg()
			// The real decode takes all of them: that is the hole.
			require.NoError(t, conf.Unmarshal(c))
			err := Check(conf, c)
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.want)
		})
	}
}

func TestCheckLeavesCfgAlone(t *testing.T) {
	conf := confmap.NewFromStringMap(map[string]any{"endpoint": "https://x", "own": map[string]any{"wait": "2s"}})
	c := newCfg()
	require.NoError(t, conf.Unmarshal(c))
	before := *c
	require.NoError(t, Check(conf, c))
	assert.Equal(t, before.Client.Endpoint, c.Client.Endpoint)
	assert.Equal(t, 2*time.Second, c.Own.Wait)
}

func TestTwinOfKeepsPlainTypes(t *testing.T) {
	type noHTTP struct {
		A int `mapstructure:"a"`
	}
	assert.Equal(t, reflect.TypeFor[noHTTP](), twinOf(reflect.TypeFor[noHTTP]()), "a config without confighttp keeps its type and methods")
	assert.NotEqual(t, reflect.TypeFor[cfg](), twinOf(reflect.TypeFor[cfg]()))
}
