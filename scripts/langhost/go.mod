// Modelplane's self-written Python language host for the Pulumi CLI (main.go says what it
// implements and why). scripts/bootstrap-tools builds it from a copy under the tools cache:
// it pins sdk/v3 to the Pulumi version it chose, adds that module's non-local replace
// directives and its go line, writes go.sum with `go mod tidy`, then runs gofmt, go vet
// and go build. Nothing generated here is committed.
module modelplane.invalid/pulumi-language-python

go 1.25.0

require github.com/pulumi/pulumi/sdk/v3 v3.274.1
