// An empty stand-in for contrib's pkg/semconvtest, which the Go module proxy
// serves at no version. See README.md.
module github.com/open-telemetry/opentelemetry-collector-contrib/pkg/semconvtest

go 1.25
