#!/usr/bin/env bash
# make deb: the Debian package of what `make build` built, with cargo-deb
# (installed here if missing). Man pages and shell completions are generated
# from the clap definitions first. Prints the package paths.
set -euo pipefail
cd "$(dirname "$0")/.."

command -v cargo-deb >/dev/null || cargo install --locked cargo-deb@3.8.0
command -v objcopy >/dev/null || { echo "deb: objcopy (binutils) is needed for the dbgsym package" >&2; exit 1; }

assets=packaging/generated
rm -rf "$assets"
mkdir -p "$assets/man" "$assets/completions"
target/release/lockstep man --out "$assets/man"
gzip -9n "$assets"/man/*.1
target/release/lockstep completions bash >"$assets/completions/lockstep"
target/release/lockstep completions zsh >"$assets/completions/_lockstep"
target/release/lockstep completions fish >"$assets/completions/lockstep.fish"

rm -f target/debian/lockstep_*.deb target/debian/lockstep-dbgsym_*.ddeb
cargo deb -p lockstep-cli --no-build --dbgsym
ls -l target/debian/lockstep_*.deb target/debian/lockstep-dbgsym_*.ddeb
