//! The manifest tells the truth: no package the build resolves needs a
//! newer compiler than goad's `rust-version` says (a host on that compiler
//! would otherwise fail on a dependency, not be told by goad's manifest).

use std::process::Command;

/// `1.94.1` as `[1, 94, 1]`, so that versions compare as numbers (and
/// `1.94` comes before `1.94.1`).
fn version(text: &str) -> Vec<u64> {
    let part = |p: &str| p.parse().unwrap_or_else(|_| panic!("a version: {text:?}"));
    text.split('.').map(part).collect()
}

#[test]
fn the_declared_rust_version_is_at_least_every_packages() {
    let out = Command::new(env!("CARGO"))
        .args(["metadata", "--format-version", "1", "--locked"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let metadata: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let packages = metadata["packages"].as_array().expect("a package list");
    let declared = (packages.iter())
        .find(|p| p["name"] == "goad")
        .and_then(|p| p["rust_version"].as_str())
        .expect("goad declares a rust-version");
    let newer: Vec<String> = packages
        .iter()
        .filter_map(|p| {
            let needs = p["rust_version"].as_str()?;
            let newer = version(needs) > version(declared);
            let (name, version) = (p["name"].as_str()?, p["version"].as_str()?);
            newer.then(|| format!("{name} {version} needs {needs}"))
        })
        .collect();
    assert!(
        newer.is_empty(),
        "Cargo.toml says rust-version {declared}, but {newer:?}"
    );
}
