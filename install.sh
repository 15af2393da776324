#!/usr/bin/env bash
# Builds and installs oci-tmpfs-hook, its runtime wrapper name and example host
# config, and registers it with the container engines (through `setup`, so all
# JSON/TOML editing is done by the tested binary, never by this script).
set -Eeuo pipefail

usage() {
  cat <<'USAGE'
Usage: ./install.sh [--prefix DIR] [--engines LIST] [--binary PATH] [--stage STAGE] [--dry-run] [--uninstall] [--help]

Builds a static release binary with cargo (or takes --binary) and installs:
  PREFIX/bin/oci-tmpfs-hook                       the hook
  PREFIX/bin/oci-tmpfs-runtime                    symlink: the runtime wrapper (Docker, containerd)
  /etc/oci-tmpfs-hook/config.toml                 example host config (kept if present)
then runs `oci-tmpfs-hook setup ENGINE` for each engine.

  --prefix DIR     install prefix (default /usr/local)
  --engines LIST   comma-separated engine names, or none (default: the engines
                   `oci-tmpfs-hook engines` finds: binary on PATH or config
                   file present; under DESTDIR, config files there)
  --binary PATH    install this binary instead of building one: no Rust toolchain
                   needed. Take it from the .deb (dpkg-deb -x oci-tmpfs-hook_*.deb d;
                   d/usr/bin/oci-tmpfs-hook) or from the node image (docker create IMG,
                   docker cp ID:/usr/local/bin/oci-tmpfs-hook .)
  --stage STAGE    Podman, CRI-O: the hook stage, prestart (default), createRuntime
                   or createContainer (GPU nodes with vendor hooks: docs/gpu.md)
  --dry-run        print what would be done (setup prints its diffs), change nothing
  --uninstall      undo setup for the engines, remove what install put there
                   (a changed config is kept)
  DESTDIR=...      stage everything under DESTDIR (for packaging); setup then
                   edits the engine configs under DESTDIR too (--root)
  OCI_TMPFS_HOOK_BINARY=PATH   the same as --binary PATH

Daemons are never restarted: setup prints the command (e.g. systemctl restart docker).
USAGE
}

prefix=/usr/local dry=0 uninstall=0 engines=auto stage=
while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) prefix=${2:?--prefix needs a directory}; shift 2 ;;
    --prefix=*) prefix=${1#*=}; shift ;;
    --engines) engines=${2:?--engines needs a list}; shift 2 ;;
    --engines=*) engines=${1#*=}; shift ;;
    --binary) OCI_TMPFS_HOOK_BINARY=${2:?--binary needs a path}; shift 2 ;;
    --binary=*) OCI_TMPFS_HOOK_BINARY=${1#*=}; shift ;;
    --stage) stage=${2:?--stage needs a stage}; shift 2 ;;
    --stage=*) stage=${1#*=}; shift ;;
    --dry-run) dry=1; shift ;;
    --uninstall) uninstall=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "install.sh: unknown argument $1" >&2; usage >&2; exit 2 ;;
  esac
done
case "$prefix" in
  /*) ;;
  *) echo "install.sh: --prefix must be an absolute path" >&2; exit 2 ;;
esac

here=$(cd "$(dirname "$0")" && pwd)
dest=${DESTDIR:-}
hook_path="$prefix/bin/oci-tmpfs-hook"
wrapper_path="$prefix/bin/oci-tmpfs-runtime"
bin="$dest$hook_path"
wrapper="$dest$wrapper_path"
confdir="$dest/etc/oci-tmpfs-hook"

run() { if [ "$dry" = 1 ]; then echo "+ $*"; else "$@"; fi; }

# The engines to register with. The binary knows them: `engines` lists the
# ones present (under DESTDIR: by their files there), `engines --all` every
# name it accepts. $1 is the binary to ask; without one (a dry run before a
# build) an explicit list is taken as given and auto finds nothing.
selected=()
select_engines() {
  local ask=$1 root_args=() found known
  if [ -n "$dest" ]; then root_args=(--root "$dest"); fi
  if [ -z "$ask" ]; then
    if [ "$engines" = auto ]; then
      echo "install.sh: no binary yet to ask which engines are present; pass --engines" >&2
    elif [ "$engines" != none ]; then
      IFS=, read -r -a selected <<<"$engines"
    fi
    return 0
  fi
  if [ "$engines" = auto ]; then
    found=$("$ask" engines ${root_args[@]+"${root_args[@]}"})
    if [ -n "$found" ]; then mapfile -t selected <<<"$found"; fi
    echo "engines found: ${selected[*]:-none}"
  elif [ "$engines" != none ]; then
    known=$("$ask" engines --all)
    IFS=, read -r -a selected <<<"$engines"
    for e in "${selected[@]}"; do
      if ! grep -qx -- "$e" <<<"$known"; then
        echo "install.sh: unknown engine $e ($(paste -sd, <<<"$known"), none)" >&2
        exit 2
      fi
    done
  fi
}

# The first runnable binary of the arguments, or nothing.
runnable() {
  local b
  for b in "$@"; do
    if [ -n "$b" ] && [ -x "$b" ]; then echo "$b"; return 0; fi
  done
}

# Runs `setup` for every selected engine with the binary $1 and extra flags.
setup_engines() {
  local setup_bin=$1; shift
  local root_args=()
  if [ -n "$dest" ]; then root_args=(--root "$dest"); fi
  for e in "${selected[@]}"; do
    local stage_args=()
    case $e in podman|crio) if [ -n "$stage" ] && [ "$uninstall" != 1 ]; then stage_args=(--stage "$stage"); fi ;; esac
    "$setup_bin" setup "$e" --hook-path "$hook_path" --runtime-path "$wrapper_path" \
      ${root_args[@]+"${root_args[@]}"} ${stage_args[@]+"${stage_args[@]}"} "$@"
  done
}

if [ "$uninstall" = 1 ]; then
  select_engines "$(runnable "$bin")"
  if [ "${#selected[@]}" -gt 0 ]; then
    if [ -x "$bin" ]; then
      if [ "$dry" = 1 ]; then setup_engines "$bin" --undo --dry-run; else setup_engines "$bin" --undo; fi
    else
      echo "install.sh: $bin is missing, so engine registrations are left as they are" >&2
    fi
  fi
  if [ -L "$wrapper" ]; then run rm -f "$wrapper"; fi
  run rm -f "$bin"
  if [ -f "$confdir/config.toml" ] && cmp -s "$confdir/config.toml" "$here/hooks/config.toml"; then
    run rm -f "$confdir/config.toml"
    run rmdir --ignore-fail-on-non-empty "$confdir"
  fi
  exit 0
fi

if [ -n "${OCI_TMPFS_HOOK_BINARY:-}" ]; then
  built=$OCI_TMPFS_HOOK_BINARY
  [ -x "$built" ] || { echo "install.sh: --binary $built is not an executable file" >&2; exit 1; }
else
  # A static binary: no dynamic loader at every container start, no
  # LD_PRELOAD; musl when rustup can give its target (packaging/build-static.sh).
  dry_arg=()
  if [ "$dry" = 1 ]; then dry_arg=(--dry-run); fi
  built=$("$here/packaging/build-static.sh" ${dry_arg[@]+"${dry_arg[@]}"} | tail -n 1) \
    || { echo "install.sh: building the static binary failed (packaging/build-static.sh, above)" >&2; exit 1; }
fi
select_engines "$(runnable "$built" "$bin")"
# The binary is replaced by one rename(2) in its directory: every container
# start runs it (the hook, the wrapper), so one that starts while this runs
# must find the old file or the new one. `install` alone unlinks the old file
# and writes the new one in place, and a start in between fails (no such file,
# or a file not yet executable). An identical binary is left as it is.
if cmp -s "$built" "$bin" && [ "$(stat -c %a "$bin")" = 755 ]; then
  echo "keeping $bin (the same binary)"
else
  staged="$(dirname "$bin")/.oci-tmpfs-hook.new"
  run install -D -m 0755 "$built" "$staged" || { rm -f "$staged"; exit 1; }
  run mv -fT "$staged" "$bin"
fi
# containerd's BinaryName takes no arguments: the wrapper is this binary under a
# second name. A link that is right already is left alone, as the binary is.
if [ "$(readlink "$wrapper" 2>/dev/null)" != oci-tmpfs-hook ]; then
  run ln -sfn oci-tmpfs-hook "$wrapper"
fi
if [ -e "$confdir/config.toml" ]; then
  echo "keeping existing $confdir/config.toml"
else
  run install -D -m 0644 "$here/hooks/config.toml" "$confdir/config.toml"
fi

if [ "${#selected[@]}" -gt 0 ]; then
  if [ "$dry" = 0 ]; then
    setup_engines "$bin"
  elif [ -x "$built" ]; then
    setup_engines "$built" --dry-run
  elif [ -x "$bin" ]; then
    setup_engines "$bin" --dry-run
  else
    for e in "${selected[@]}"; do
      stage_arg=
      case $e in podman|crio) if [ -n "$stage" ]; then stage_arg=" --stage $stage"; fi ;; esac
      echo "+ $bin setup $e --hook-path $hook_path --runtime-path $wrapper_path$stage_arg"
    done
  fi
fi
if [ "$dry" = 1 ]; then echo "dry run: nothing changed"; else echo "installed $bin"; fi
