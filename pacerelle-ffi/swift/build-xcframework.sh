#!/usr/bin/env bash
# Builds the Swift package of the phone SDK on macOS (Xcode and rustup required):
#   PacerelleFFI.xcframework  static libraries for iOS devices, the iOS simulator and macOS, with the C
#                             headers and module maps uniffi-bindgen generates (the SDK's and the core's)
#   Sources/Pacerelle/Pacerelle.swift, PacerelleCore.swift   the generated Swift API: the SDK, and the
#                             core's enums and records it passes as they are (one Swift module)
# Run from anywhere: bash pacerelle-ffi/swift/build-xcframework.sh [--debug]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
profile=release
flag=(--release)
if [[ ${1:-} == --debug ]]; then profile=debug; flag=(); fi

[[ $(uname) == Darwin ]] || { echo "error: build the XCFramework on macOS (Xcode is needed)" >&2; exit 1; }

targets=(aarch64-apple-ios aarch64-apple-ios-sim x86_64-apple-ios aarch64-apple-darwin x86_64-apple-darwin)
rustup target add "${targets[@]}"
cd "$root"
for t in "${targets[@]}"; do
    cargo build -p pacerelle-ffi --lib "${flag[@]}" --target "$t"
done

# The bindings come from the host library (same interface on every target).
cargo build -p pacerelle-ffi -p uniffi-bindgen "${flag[@]}"
gen="$root/target/bindings/swift"
rm -rf "$gen"
"target/$profile/uniffi-bindgen" generate "target/$profile/libpacerelle_ffi.dylib" \
    --language swift --out-dir "$gen"

# A framework's headers folder holds the headers and one module map named module.modulemap, which declares
# both C modules: PacerelleFFI (the SDK) and PacerelleCoreFFI (the core's types).
headers="$root/target/xcframework/headers"
rm -rf "$headers" && mkdir -p "$headers"
cp "$gen/PacerelleFFI.h" "$gen/PacerelleCoreFFI.h" "$headers/"
{ cat "$gen/PacerelleFFI.modulemap"; echo; cat "$gen/PacerelleCoreFFI.modulemap"; echo; } > "$headers/module.modulemap"

# One library per platform: the simulator and macOS slices are merged with lipo.
out="$root/target/xcframework"
lib=libpacerelle_ffi.a
mkdir -p "$out/ios-sim" "$out/macos"
lipo -create "target/aarch64-apple-ios-sim/$profile/$lib" "target/x86_64-apple-ios/$profile/$lib" \
    -output "$out/ios-sim/$lib"
lipo -create "target/aarch64-apple-darwin/$profile/$lib" "target/x86_64-apple-darwin/$profile/$lib" \
    -output "$out/macos/$lib"

rm -rf "$here/PacerelleFFI.xcframework"
xcodebuild -create-xcframework \
    -library "target/aarch64-apple-ios/$profile/$lib" -headers "$headers" \
    -library "$out/ios-sim/$lib" -headers "$headers" \
    -library "$out/macos/$lib" -headers "$headers" \
    -output "$here/PacerelleFFI.xcframework"
cp "$gen/Pacerelle.swift" "$gen/PacerelleCore.swift" "$here/Sources/Pacerelle/"
echo "built $here/PacerelleFFI.xcframework and Sources/Pacerelle/{Pacerelle,PacerelleCore}.swift; try: (cd $here && swift build)"
