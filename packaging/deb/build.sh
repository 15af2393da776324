#!/usr/bin/env bash
# Builds the Debian package oci-tmpfs-hook_VERSION-1_ARCH.deb with dpkg-deb:
#   /usr/bin/oci-tmpfs-hook                              the static binary
#   /usr/bin/oci-tmpfs-runtime -> oci-tmpfs-hook         the runtime wrapper name
#   /usr/share/containers/oci/hooks.d/oci-tmpfs-hook.json  the hook for Podman and CRI-O
#   /etc/oci-tmpfs-hook/config.toml                      the commented host config (a conffile)
#   /usr/share/doc/oci-tmpfs-hook/                       README, copyright, changelog
#   /usr/share/man/man1/oci-tmpfs-hook.1.gz              a short manual page
# The files are laid out by install.sh (DESTDIR, --prefix /usr) and the hooks
# JSON is written by the binary itself (`setup podman --root`), so the
# package holds exactly what the tested code writes. The maintainer scripts
# edit no engine config: postinst prints the `setup` commands for Docker and
# containerd (Podman and CRI-O need none: the hooks JSON is in their dir).
#
# Usage: packaging/deb/build.sh [--binary PATH] [--out DIR]
#   --binary PATH  package this static binary instead of building one (cargo)
#   --out DIR      where the .deb goes [default: target/deb]
# Prints the .deb's path on the last line.
set -Eeuo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
binary=${OCI_TMPFS_HOOK_BINARY:-} out="$repo/target/deb"
while [ $# -gt 0 ]; do
  case "$1" in
    --binary) binary=${2:?--binary needs a path}; shift 2 ;;
    --out) out=${2:?--out needs a directory}; shift 2 ;;
    -h|--help) sed -n '2,/^set -E/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "build.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
command -v dpkg-deb >/dev/null || { echo "build.sh: dpkg-deb not found (apt-get install dpkg)" >&2; exit 1; }

version=$(sed -n 's/^version = "\(.*\)"/\1/p' "$repo/Cargo.toml" | head -n1)
debversion="$version-1"
arch=$(dpkg --print-architecture)
pkg=oci-tmpfs-hook
# Who the package says maintains it: DEBFULLNAME and DEBEMAIL, as dch reads them.
maintainer="${DEBFULLNAME:-oci-tmpfs-hook maintainers} <${DEBEMAIL:-maintainers@oci-tmpfs-hook.invalid}>"
# Reproducible: timestamps from the last commit (or SOURCE_DATE_EPOCH).
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git -C "$repo" log -1 --format=%ct 2>/dev/null || date +%s)}
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
root="$stage/root"

# Binary, wrapper link, host config, hooks JSON: install.sh under DESTDIR.
binary_args=()
if [ -n "$binary" ]; then binary_args=(--binary "$binary"); fi
DESTDIR="$root" "$repo/install.sh" --prefix /usr --engines podman ${binary_args[@]+"${binary_args[@]}"} \
  >"$stage/install.log" \
  || { cat "$stage/install.log" >&2; echo "build.sh: install.sh into the staging dir failed" >&2; exit 1; }
file -L "$root/usr/bin/$pkg" | grep -Eq 'statically linked|static-pie' \
  || { echo "build.sh: $root/usr/bin/$pkg is not statically linked; build it as install.sh does" >&2; exit 1; }

doc="$root/usr/share/doc/$pkg"
install -d -m 0755 "$doc" "$root/usr/share/man/man1"
install -m 0644 "$repo/README.md" "$doc/README.md"
install -m 0644 "$here/copyright" "$doc/copyright"
date=$(date -u -R -d "@$SOURCE_DATE_EPOCH")
printf '%s (%s) unstable; urgency=medium\n\n  * Package built by packaging/deb/build.sh from the upstream tree.\n\n -- %s  %s\n' \
  "$pkg" "$debversion" "$maintainer" "$date" | gzip -9n >"$doc/changelog.Debian.gz"
gzip -9n <"$here/oci-tmpfs-hook.1" >"$root/usr/share/man/man1/oci-tmpfs-hook.1.gz"
ln -s oci-tmpfs-hook.1.gz "$root/usr/share/man/man1/oci-tmpfs-runtime.1.gz"
install -D -m 0644 "$here/lintian-overrides" "$root/usr/share/lintian/overrides/$pkg"
chmod 0644 "$root/usr/share/man/man1/oci-tmpfs-hook.1.gz" "$doc/changelog.Debian.gz"

install -d -m 0755 "$root/DEBIAN"
size=$(du -k -s --exclude=DEBIAN "$root" | cut -f1)
sed -e "s/@VERSION@/$debversion/" -e "s/@ARCH@/$arch/" -e "s/@SIZE@/$size/" -e "s|@MAINTAINER@|$maintainer|" \
  "$here/control" >"$root/DEBIAN/control"
install -m 0755 "$here/postinst" "$root/DEBIAN/postinst"
echo /etc/oci-tmpfs-hook/config.toml >"$root/DEBIAN/conffiles"
(cd "$root" && find . -path ./DEBIAN -prune -o -type f -print | sed 's|^\./||' | LC_ALL=C sort | xargs md5sum) \
  >"$root/DEBIAN/md5sums"
chmod 0644 "$root/DEBIAN/control" "$root/DEBIAN/conffiles" "$root/DEBIAN/md5sums"
find "$root" -type d -exec chmod 0755 {} +
find "$root" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +

mkdir -p "$out"
deb="$out/${pkg}_${debversion}_${arch}.deb"
dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
echo "$deb"
