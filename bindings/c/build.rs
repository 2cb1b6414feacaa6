//! Generates the C header with cbindgen into `$OUT_DIR/agentbreaker.h` on every build of the
//! library. The committed `include/agentbreaker.h` must be identical: `make test-c` diffs the two
//! and fails on any difference; `make c-header` copies the fresh one over the committed one.

use std::env;
use std::error::Error;
use std::path::PathBuf;

fn main() -> Result<(), Box<dyn Error>> {
    let crate_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR")?);
    let out_dir = PathBuf::from(env::var("OUT_DIR")?);
    println!("cargo:rerun-if-changed=src");
    println!("cargo:rerun-if-changed=cbindgen.toml");
    let config = cbindgen::Config::from_file(crate_dir.join("cbindgen.toml"))?;
    // `with_src` parses the sources (following `mod` items) without running `cargo metadata`.
    let bindings = cbindgen::Builder::new()
        .with_config(config)
        .with_src(crate_dir.join("src/lib.rs"))
        .generate()?;
    bindings.write_to_file(out_dir.join("agentbreaker.h"));
    Ok(())
}
