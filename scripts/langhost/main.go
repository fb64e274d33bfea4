// Minimal Python language host for the Pulumi CLI, written for modelplane's
// scripts/bootstrap-tools. It is NOT upstream's pulumi-language-python (that
// module is not served by the Go module proxy this project can reach); it
// implements only what `pulumi preview/up/destroy` and Python policy packs need:
//
//   - Run: start `<python> -u pulumi-language-python-exec --monitor ... PROGRAM`
//     (the exec shim ships in the pulumi sdk/v3 module and sits next to this
//     binary), with PULUMI_CONFIG / PULUMI_CONFIG_SECRET_KEYS in the environment.
//   - RunPlugin: start Python plugins, e.g. policy packs (`python -u -m pulumi.policy`).
//   - GetRequiredPlugins / GetRequiredPackages: report nothing; providers are
//     found on PATH (ambient plugins) when the program registers resources.
//   - GetPluginInfo, About, GetProgramDependencies, InstallDependencies (no-op).
//
// The interpreter is chosen like this: runtime option `virtualenv` (relative to
// the project / policy-pack root) -> <venv>/bin/python; `toolchain: uv` -> <root>/.venv;
// otherwise $PULUMI_PYTHON_CMD, else python3 on PATH.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/pulumi/pulumi/sdk/v3/go/common/util/rpcutil"
	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/structpb"
)

// Version is stamped with -ldflags "-X main.Version=...".
var Version = "0.0.0-dev"

// exitCodeUserActionable is what the exec shim returns after it already showed the error.
const exitCodeUserActionable = 32

type host struct {
	pulumirpc.UnimplementedLanguageRuntimeServer
	engineAddress string
	execShim      string
}

func main() {
	var positional []string
	args := os.Args[1:]
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--tracing" || a == "-tracing" || a == "--root" || a == "-root":
			i++ // flag with a separate value
		case strings.HasPrefix(a, "-"):
			// --logtostderr, -v=N, --logflow, ... : ignored
		default:
			positional = append(positional, a)
		}
	}
	if len(positional) == 0 {
		fmt.Fprintln(os.Stderr, "usage: pulumi-language-python [flags] ENGINE_ADDRESS")
		os.Exit(1)
	}
	exe, err := os.Executable()
	if err == nil {
		if real, rerr := filepath.EvalSymlinks(exe); rerr == nil {
			exe = real
		}
	}
	h := &host{
		engineAddress: positional[len(positional)-1],
		execShim:      filepath.Join(filepath.Dir(exe), "pulumi-language-python-exec"),
	}
	handle, err := rpcutil.ServeWithOptions(rpcutil.ServeOptions{
		Init: func(s *grpc.Server) error {
			pulumirpc.RegisterLanguageRuntimeServer(s, h)
			return nil
		},
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "could not start language host RPC server: %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("%d\n", handle.Port)
	if err := <-handle.Done; err != nil {
		fmt.Fprintf(os.Stderr, "language host RPC server stopped: %v\n", err)
		os.Exit(1)
	}
}

func optionString(opts *structpb.Struct, key string) string {
	if opts == nil {
		return ""
	}
	if v, ok := opts.Fields[key]; ok {
		return v.GetStringValue()
	}
	return ""
}

// interpreter returns the python executable and the virtualenv directory ("" when none).
func interpreter(info *pulumirpc.ProgramInfo, fallbackRoot string) (string, string, error) {
	root := fallbackRoot
	var opts *structpb.Struct
	if info != nil {
		if info.RootDirectory != "" {
			root = info.RootDirectory
		}
		opts = info.Options
	}
	venv := optionString(opts, "virtualenv")
	if venv == "" && optionString(opts, "toolchain") == "uv" {
		venv = ".venv"
	}
	if venv != "" {
		if !filepath.IsAbs(venv) {
			venv = filepath.Join(root, venv)
		}
		py := filepath.Join(venv, "bin", "python")
		if _, err := os.Stat(py); err != nil {
			return "", "", fmt.Errorf("the 'virtualenv' option points at %q, but %q does not exist", venv, py)
		}
		return py, venv, nil
	}
	cmd := os.Getenv("PULUMI_PYTHON_CMD")
	if cmd == "" {
		cmd = "python3"
	}
	py, err := exec.LookPath(cmd)
	if err != nil {
		return "", "", fmt.Errorf("no Python interpreter: %q not found on PATH", cmd)
	}
	return py, "", nil
}

func childEnv(venv string, extra ...string) []string {
	env := os.Environ()
	if venv != "" {
		kept := env[:0:0]
		for _, kv := range env {
			if strings.HasPrefix(kv, "PYTHONHOME=") || strings.HasPrefix(kv, "PATH=") ||
				strings.HasPrefix(kv, "VIRTUAL_ENV=") {
				continue
			}
			kept = append(kept, kv)
		}
		env = append(kept,
			"VIRTUAL_ENV="+venv,
			"PATH="+filepath.Join(venv, "bin")+string(os.PathListSeparator)+os.Getenv("PATH"))
	}
	return append(env, extra...)
}

func (h *host) Handshake(ctx context.Context, req *pulumirpc.LanguageHandshakeRequest,
) (*pulumirpc.LanguageHandshakeResponse, error) {
	if req.EngineAddress != "" {
		h.engineAddress = req.EngineAddress
	}
	return &pulumirpc.LanguageHandshakeResponse{}, nil
}

func (h *host) GetPluginInfo(context.Context, *emptypb.Empty) (*pulumirpc.PluginInfo, error) {
	return &pulumirpc.PluginInfo{Version: strings.TrimPrefix(Version, "v")}, nil
}

func (h *host) GetRequiredPlugins(context.Context, *pulumirpc.GetRequiredPluginsRequest,
) (*pulumirpc.GetRequiredPluginsResponse, error) {
	return &pulumirpc.GetRequiredPluginsResponse{}, nil
}

func (h *host) GetRequiredPackages(context.Context, *pulumirpc.GetRequiredPackagesRequest,
) (*pulumirpc.GetRequiredPackagesResponse, error) {
	return &pulumirpc.GetRequiredPackagesResponse{}, nil
}

func (h *host) GetProgramDependencies(context.Context, *pulumirpc.GetProgramDependenciesRequest,
) (*pulumirpc.GetProgramDependenciesResponse, error) {
	return &pulumirpc.GetProgramDependenciesResponse{}, nil
}

func (h *host) InstallDependencies(*pulumirpc.InstallDependenciesRequest,
	grpc.ServerStreamingServer[pulumirpc.InstallDependenciesResponse],
) error {
	return nil // dependencies are installed by the project's own tooling
}

func (h *host) About(_ context.Context, req *pulumirpc.AboutRequest) (*pulumirpc.AboutResponse, error) {
	py, _, err := interpreter(req.GetInfo(), ".")
	if err != nil {
		return nil, err
	}
	out, err := exec.Command(py, "--version").CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("%s --version: %w", py, err)
	}
	return &pulumirpc.AboutResponse{
		Executable: py,
		Version:    strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(string(out)), "Python")),
		Metadata:   map[string]string{"host": "modelplane minimal python language host " + Version},
	}, nil
}

func (h *host) Run(ctx context.Context, req *pulumirpc.RunRequest) (*pulumirpc.RunResponse, error) {
	root := req.Pwd
	if req.Info != nil && req.Info.RootDirectory != "" {
		root = req.Info.RootDirectory
	}
	py, venv, err := interpreter(req.Info, root)
	if err != nil {
		return &pulumirpc.RunResponse{Error: err.Error()}, nil
	}
	program := req.Program
	if req.Info != nil && req.Info.ProgramDirectory != "" {
		entry := req.Info.EntryPoint
		if entry == "" {
			entry = "."
		}
		program = filepath.Join(req.Info.ProgramDirectory, entry)
	}
	config, err := json.Marshal(req.Config)
	if err != nil {
		return nil, err
	}
	secretKeys := req.ConfigSecretKeys
	if secretKeys == nil {
		secretKeys = []string{}
	}
	secrets, err := json.Marshal(secretKeys)
	if err != nil {
		return nil, err
	}
	args := []string{"-u", h.execShim,
		"--monitor", req.MonitorAddress,
		"--engine", h.engineAddress,
		"--project", req.Project,
		"--stack", req.Stack,
		"--pwd", req.Pwd,
		"--dry_run", strconv.FormatBool(req.DryRun),
		"--parallel", strconv.Itoa(int(req.Parallel)),
		"--organization", req.Organization,
		"--root_directory", root,
		program,
	}
	args = append(args, req.Args...)
	cmd := exec.CommandContext(ctx, py, args...)
	cmd.Dir = req.Pwd
	cmd.Stdout = os.Stdout
	cmd.Stderr = os.Stderr
	cmd.Env = childEnv(venv, "PULUMI_CONFIG="+string(config), "PULUMI_CONFIG_SECRET_KEYS="+string(secrets))
	if err := cmd.Run(); err != nil {
		var exitErr *exec.ExitError
		if errors.As(err, &exitErr) {
			if status, ok := exitErr.Sys().(syscall.WaitStatus); ok && status.ExitStatus() == exitCodeUserActionable {
				return &pulumirpc.RunResponse{Bail: true}, nil
			}
			return &pulumirpc.RunResponse{Error: fmt.Sprintf("Program exited with non-zero exit code: %d",
				exitErr.ExitCode())}, nil
		}
		return &pulumirpc.RunResponse{Error: fmt.Sprintf("Problem executing program (could not run language executor): %v", err)}, nil
	}
	return &pulumirpc.RunResponse{}, nil
}

type streamWriter struct {
	mu     *sync.Mutex
	stream grpc.ServerStreamingServer[pulumirpc.RunPluginResponse]
	stderr bool
}

func (w streamWriter) Write(p []byte) (int, error) {
	buf := append([]byte(nil), p...)
	w.mu.Lock()
	defer w.mu.Unlock()
	var msg *pulumirpc.RunPluginResponse
	if w.stderr {
		msg = &pulumirpc.RunPluginResponse{Output: &pulumirpc.RunPluginResponse_Stderr{Stderr: buf}}
	} else {
		msg = &pulumirpc.RunPluginResponse{Output: &pulumirpc.RunPluginResponse_Stdout{Stdout: buf}}
	}
	if err := w.stream.Send(msg); err != nil {
		return 0, err
	}
	return len(p), nil
}

var _ io.Writer = streamWriter{}

func (h *host) RunPlugin(req *pulumirpc.RunPluginRequest,
	stream grpc.ServerStreamingServer[pulumirpc.RunPluginResponse],
) error {
	dir := req.Pwd
	if req.Info != nil && req.Info.ProgramDirectory != "" {
		dir = req.Info.ProgramDirectory
	}
	py, venv, err := interpreter(req.Info, dir)
	if err != nil {
		return err
	}
	var pluginArgs []string
	for _, a := range req.Args {
		if strings.HasPrefix(a, "-v=") { // python argparse cannot take -v=N
			continue
		}
		pluginArgs = append(pluginArgs, a)
	}
	var args []string
	if req.Kind == "analyzer" {
		// Policy packs: `python -m pulumi.policy ENGINE_ADDRESS PROGRAM_DIR`.
		args = append([]string{"-u", "-m", "pulumi.policy"}, pluginArgs...)
		args = append(args, dir)
	} else {
		args = append([]string{"-u", dir}, pluginArgs...)
	}
	cmd := exec.CommandContext(stream.Context(), py, args...)
	cmd.Dir = dir
	cmd.Env = childEnv(venv, req.Env...)
	mu := &sync.Mutex{}
	cmd.Stdout = streamWriter{mu: mu, stream: stream}
	cmd.Stderr = streamWriter{mu: mu, stream: stream, stderr: true}
	code := int32(0)
	if err := cmd.Run(); err != nil {
		var exitErr *exec.ExitError
		if !errors.As(err, &exitErr) {
			return fmt.Errorf("could not run plugin %q with %s: %w", dir, py, err)
		}
		code = int32(exitErr.ExitCode())
	}
	mu.Lock()
	defer mu.Unlock()
	return stream.Send(&pulumirpc.RunPluginResponse{Output: &pulumirpc.RunPluginResponse_Exitcode{Exitcode: code}})
}
