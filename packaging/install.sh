#!/bin/sh
# Installs `pacerelle` and `pacerelle-mcp` from a release archive, after checking its SHA-256 sum against
# the release's SHA256SUMS file. Nothing is installed when the sum does not match.
#
#   curl -fsSL BASE_URL/install.sh | sh
#   sh install.sh [--prefix DIR] [--base-url URL] [--version VERSION]
#
#   --prefix DIR     install into DIR/bin (default: ~/.local, so ~/.local/bin); or PACERELLE_PREFIX
#   --base-url URL   where pacerelle-VERSION-TARGET.tar.gz and SHA256SUMS are; or PACERELLE_BASE_URL
#   --version V      the version to install; or PACERELLE_VERSION
#
# `cargo xtask dist` writes this file into dist/ with the version and base URL of that release filled in.
set -eu

version="${PACERELLE_VERSION:-@VERSION@}"
base_url="${PACERELLE_BASE_URL:-@BASE_URL@}"
prefix="${PACERELLE_PREFIX:-${HOME:-}/.local}"

usage() {
    cat <<EOF
Installs pacerelle and pacerelle-mcp from a release archive, after checking its SHA-256 sum.

usage: sh install.sh [--prefix DIR] [--base-url URL] [--version VERSION]

  --prefix DIR     install into DIR/bin (default: ~/.local); or PACERELLE_PREFIX
  --base-url URL   where the archives and SHA256SUMS are; or PACERELLE_BASE_URL
  --version V      the version to install; or PACERELLE_VERSION
EOF
}
say() { printf 'pacerelle install: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }

while [ $# -gt 0 ]; do
    case "$1" in
        --prefix) [ $# -ge 2 ] || die "--prefix needs a folder"; prefix="$2"; shift 2 ;;
        --base-url) [ $# -ge 2 ] || die "--base-url needs a URL"; base_url="$2"; shift 2 ;;
        --version) [ $# -ge 2 ] || die "--version needs a version"; version="$2"; shift 2 ;;
        -h | --help) usage; exit 0 ;;
        *) die "unknown argument: $1 (see --help)" ;;
    esac
done
case "$version" in '' | @*) die "no version: pass --version VERSION" ;; esac
case "$base_url" in '' | @*) die "no base URL: pass --base-url URL (the folder of the release's archives)" ;; esac
[ -n "$prefix" ] || die "no prefix: pass --prefix DIR"
base_url="${base_url%/}"

# The archive's target triple, as `cargo xtask dist` names it.
os=$(uname -s)
arch=$(uname -m)
case "$arch" in
    x86_64 | amd64) arch=x86_64 ;;
    aarch64 | arm64) arch=aarch64 ;;
    *) die "no archive for this processor ($arch); build from source: cargo install --locked pacerelle-cli pacerelle-mcp" ;;
esac
case "$os" in
    Linux)
        if ldd --version 2>&1 | grep -qi musl; then
            die "no archive for musl libc ($arch Linux); build from source: cargo install --locked pacerelle-cli pacerelle-mcp"
        fi
        target="$arch-unknown-linux-gnu" ;;
    Darwin) target="$arch-apple-darwin" ;;
    *) die "no archive for this system ($os); build from source: cargo install --locked pacerelle-cli pacerelle-mcp" ;;
esac
archive="pacerelle-$version-$target.tar.gz"

fetch() { # URL FILE
    if command -v curl >/dev/null 2>&1; then
        curl --proto '=https,http,file' -fsSL -o "$2" "$1"
    elif command -v wget >/dev/null 2>&1; then
        wget -q -O "$2" "$1"
    else
        die "neither curl nor wget is installed"
    fi
}

sha256() { # FILE
    if command -v sha256sum >/dev/null 2>&1; then
        sha256sum "$1" | cut -d ' ' -f 1
    elif command -v shasum >/dev/null 2>&1; then
        shasum -a 256 "$1" | cut -d ' ' -f 1
    else
        die "neither sha256sum nor shasum is installed: cannot check the archive"
    fi
}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/pacerelle-install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM

say "downloading $base_url/$archive"
fetch "$base_url/SHA256SUMS" "$tmp/SHA256SUMS" || die "cannot download $base_url/SHA256SUMS"
fetch "$base_url/$archive" "$tmp/$archive" || die "cannot download $base_url/$archive"

expected=$(awk -v name="$archive" '$2 == name || $2 == "*" name { print $1; exit }' "$tmp/SHA256SUMS")
[ -n "$expected" ] || die "SHA256SUMS has no line for $archive"
actual=$(sha256 "$tmp/$archive")
if [ "$actual" != "$expected" ]; then
    die "the SHA-256 sum of $archive is $actual, not $expected as SHA256SUMS says: nothing installed"
fi

mkdir "$tmp/unpacked"
tar -xzf "$tmp/$archive" -C "$tmp/unpacked"
folder="$tmp/unpacked/pacerelle-$version-$target"
for program in pacerelle pacerelle-mcp; do
    [ -f "$folder/$program" ] || die "$archive holds no $program"
done

bin="$prefix/bin"
mkdir -p "$bin"
# Each program is copied beside its place, then renamed over it: a running copy is never half written.
for program in pacerelle pacerelle-mcp; do
    cp "$folder/$program" "$bin/.$program.new.$$"
    chmod 755 "$bin/.$program.new.$$"
    mv -f "$bin/.$program.new.$$" "$bin/$program"
done

say "installed $("$bin/pacerelle" --version) and $("$bin/pacerelle-mcp" --version) into $bin"
case ":${PATH:-}:" in
    *":$bin:"*) ;;
    *) say "$bin is not on PATH: add it, e.g. export PATH=\"$bin:\$PATH\"" ;;
esac
