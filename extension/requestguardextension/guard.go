// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package requestguardextension // import "github.com/inferprof/inferprof/extension/requestguardextension"

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension"
	"go.opentelemetry.io/collector/extension/extensionmiddleware"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"

	"github.com/inferprof/inferprof/extension/requestguardextension/internal/depth"
	"github.com/inferprof/inferprof/extension/requestguardextension/internal/metadata"
	"github.com/inferprof/inferprof/internal/hostcheck"
)

var (
	_ extensionmiddleware.HTTPServer = (*guard)(nil)
	_ extensionmiddleware.GRPCServer = (*guard)(nil)
)

type guard struct {
	component.StartFunc
	component.ShutdownFunc

	maxDepth int
	hosts    *hostcheck.Checker
	tb       *metadata.TelemetryBuilder
	// log is sampled: the first refusal of each kind a minute is logged, the
	// counters have the rest.
	log *zap.Logger

	// refused holds gRPC requests the codec left undecoded, until the
	// interceptor answers them: a codec's error always reaches the client
	// as Internal, and a body too deep is the client's fault.
	refused sync.Map
}

func newGuard(set extension.Settings, cfg *Config) (*guard, error) {
	hosts, err := hostcheck.New(cfg.AllowedHosts)
	if err != nil {
		return nil, err
	}
	tb, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	g := &guard{
		maxDepth: cfg.MaxDepth,
		hosts:    hosts,
		tb:       tb,
		log: set.Logger.WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core {
			return zapcore.NewSamplerWithOptions(c, time.Minute, 1, 0)
		})),
	}
	g.ShutdownFunc = func(context.Context) error { tb.Shutdown(); return nil }
	return g, nil
}

// GetHTTPHandler checks the Host, then the body's depth. confighttp runs
// middlewares after decompression and its body size limit, so the bytes
// seen here are the ones the receiver decodes, already bounded.
func (g *guard) GetHTTPHandler(context.Context) (extensionmiddleware.WrapHTTPHandlerFunc, error) {
	return func(_ context.Context, next http.Handler) (http.Handler, error) {
		return g.hosts.Middleware(g.depthHandler(next), g.foreignHost), nil
	}, nil
}

func (g *guard) foreignHost(r *http.Request) {
	g.tb.RequestGuardForeignHostRequests.Add(r.Context(), 1)
	g.log.Warn("request refused: Host is not a loopback name nor in allowed_hosts",
		zap.String("host", r.Host), zap.String("path", r.URL.Path), zap.String("remote", r.RemoteAddr))
}

type codec int

const (
	codecNone codec = iota
	codecProto
	codecJSON
)

func codecOf(contentType string) codec {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return codecNone
	}
	switch {
	case strings.HasSuffix(mt, "protobuf"):
		return codecProto
	case mt == "application/json" || strings.HasSuffix(mt, "+json"):
		return codecJSON
	}
	return codecNone
}

func (g *guard) depthHandler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := codecOf(r.Header.Get("Content-Type"))
		if c == codecNone || r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		orig := r.Body
		body, err := io.ReadAll(orig)
		if err != nil {
			// Too large, or cut off: the receiver reports it as it always
			// has, from the same error.
			r.Body = readCloser{io.MultiReader(bytes.NewReader(body), errReader{err}), orig}
			next.ServeHTTP(w, r)
			return
		}
		if err := g.check(c, body); err != nil {
			g.deep(r.Context(), err, zap.String("path", r.URL.Path), zap.String("remote", r.RemoteAddr))
			writeStatus(w, c, err)
			return
		}
		r.Body = readCloser{bytes.NewReader(body), orig}
		next.ServeHTTP(w, r)
	})
}

func (g *guard) check(c codec, body []byte) error {
	if c == codecJSON {
		return depth.JSON(body, g.maxDepth)
	}
	return depth.Proto(body, g.maxDepth)
}

func (g *guard) deep(ctx context.Context, err error, fields ...zap.Field) {
	g.tb.RequestGuardDeepRequests.Add(ctx, 1)
	g.log.Warn("request refused before decoding", append(fields, zap.Error(err))...)
}

type readCloser struct {
	io.Reader
	io.Closer
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// writeStatus answers 400 with a google.rpc.Status in the request's
// encoding, as OTLP/HTTP asks of a server.
func writeStatus(w http.ResponseWriter, c codec, err error) {
	msg := err.Error()
	var body []byte
	if c == codecJSON {
		w.Header().Set("Content-Type", "application/json")
		body = fmt.Appendf(nil, `{"code":%d,"message":%q}`, codes.InvalidArgument, msg)
	} else {
		w.Header().Set("Content-Type", "application/x-protobuf")
		// Status{code: 1 varint, message: 2 string}; msg is under 128 bytes.
		body = append([]byte{0x08, byte(codes.InvalidArgument), 0x12, byte(len(msg))}, msg...)
	}
	w.WriteHeader(http.StatusBadRequest)
	_, _ = w.Write(body)
}

// GetGRPCServerOptions replaces the server's codec with one that scans each
// message before pdata's decodes it, and adds the interceptor that answers
// the ones it refused.
func (g *guard) GetGRPCServerOptions(context.Context) ([]grpc.ServerOption, error) {
	delegate := encoding.GetCodecV2(depthCodecName)
	if delegate == nil {
		return nil, errors.New("no gRPC proto codec registered")
	}
	return []grpc.ServerOption{
		grpc.ForceServerCodecV2(&depthCodec{delegate: delegate, g: g}),
		grpc.ChainUnaryInterceptor(g.unary),
	}, nil
}

const depthCodecName = "proto"

type depthCodec struct {
	delegate encoding.CodecV2
	g        *guard
}

func (c *depthCodec) Name() string { return depthCodecName }

func (c *depthCodec) Marshal(v any) (mem.BufferSlice, error) { return c.delegate.Marshal(v) }

func (c *depthCodec) Unmarshal(data mem.BufferSlice, v any) error {
	// One buffer is used as it is; several are joined once, and the joined
	// one is what the delegate decodes, so the bytes are not copied twice.
	buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
	defer buf.Free()
	if err := depth.Proto(buf.ReadOnlyData(), c.g.maxDepth); err != nil {
		c.g.refused.Store(v, err)
		return nil
	}
	return c.delegate.Unmarshal(mem.BufferSlice{buf}, v)
}

func (g *guard) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if e, ok := g.refused.LoadAndDelete(req); ok {
		err := e.(error)
		g.deep(ctx, err, zap.String("method", info.FullMethod))
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	return handler(ctx, req)
}
