//! `cargo xtask package`: the browser module as an npm package, `@sealpost/browser`, packed by
//! `npm pack` into `target/npm/sealpost-browser-<version>.tgz` for host apps to install.
//!
//! The package is the module as `cargo xtask web` builds it (`target/web/sealpost/`): every
//! `.js` and `.d.ts` of `crates/browser/js`, and `pkg/` (the wasm and its glue). A script with
//! declarations beside it (`NAME.js` and `NAME.d.ts`) is an entry point: `sealpost` is the
//! package's own (`.`), any other is `./NAME`. The other scripts (the Worker and its store)
//! are the module's inside and are shipped, not exported, except `./worker.js`: a bundler that
//! does not follow the module's own `new URL('./worker.js', import.meta.url)` is given the
//! Worker by name and hands its URL to `Sealpost.open({ workerUrl })`.
//!
//! `crates/browser/npm/` holds what is written by hand: `package.template.json` (name,
//! description, side effects) and the package's `README.md` (`{version}` filled in). The version
//! and the licence are the browser crate's, read from `cargo metadata`.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result, bail, ensure};
use serde::ser::{Serialize, SerializeMap as _, Serializer};
use serde_json::{Value, json};

use crate::cmd::{cargo, cmd, root};
use crate::tools::find_in_path;
use crate::web;

/// The crate whose build the package ships, and whose version and licence it carries.
const BROWSER_CRATE: &str = "sealpost-browser";
/// The script whose exports are the package's own (`import … from '@sealpost/browser'`).
const MAIN_ENTRY: &str = "sealpost";
/// The Worker the module starts; exported by name for bundlers that need its URL.
const WORKER: &str = "worker.js";
/// The wasm-bindgen output the Worker loads, beside it.
const WASM_DIR: &str = "pkg";

/// Where the tarball goes.
pub fn out_dir() -> PathBuf {
    root().join("target/npm")
}

/// `cargo xtask package`: builds the module (as `cargo xtask web` does) and packs it.
pub fn build() -> Result<PathBuf> {
    web::build()?;
    pack()
}

/// Packs the module `cargo xtask web` built into `target/web/sealpost/`; answers the tarball.
pub fn pack() -> Result<PathBuf> {
    let module = web::out_dir().join("sealpost");
    ensure!(
        module.join(WASM_DIR).is_dir(),
        "{} holds no built module: run `cargo xtask web` first",
        module.display()
    );
    let (version, license) = crate_version_and_license()?;
    let out = out_dir();
    let staging = out.join("package");
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::create_dir_all(&staging)?;
    remove_old_tarballs(&out)?;

    let scripts = copy_scripts(&module, &staging)?;
    copy_wasm_dir(&module.join(WASM_DIR), &staging.join(WASM_DIR))?;
    let npm_dir = root().join("crates/browser/npm");
    let template: Value = serde_json::from_str(
        &std::fs::read_to_string(npm_dir.join("package.template.json"))
            .context("reading crates/browser/npm/package.template.json")?,
    )
    .context("crates/browser/npm/package.template.json is not JSON")?;
    let manifest = package_json(template, &version, &license, &scripts)?;
    std::fs::write(
        staging.join("package.json"),
        serde_json::to_string_pretty(&InUsualOrder(&manifest))? + "\n",
    )?;
    let readme = std::fs::read_to_string(npm_dir.join("README.md"))
        .context("reading crates/browser/npm/README.md")?;
    std::fs::write(
        staging.join("README.md"),
        readme.replace("{version}", &version),
    )?;

    let npm = find_in_path("npm")
        .context("npm is not installed: run `apt-get install -y nodejs npm` (as root)")?;
    let packed = cmd(
        &npm,
        &["pack", "--json", "--ignore-scripts", "--pack-destination"],
    )
    .arg_path(&out)
    .dir(&staging)
    .read()?;
    let tarball = out.join(check_packed(&packed, &manifest)?);
    eprintln!("wrote {}", tarball.display());
    Ok(tarball)
}

/// The browser crate's version and licence as Cargo resolves them (both come from the
/// workspace).
fn crate_version_and_license() -> Result<(String, String)> {
    let metadata: Value =
        serde_json::from_str(&cargo(&["metadata", "--no-deps", "--format-version", "1"]).read()?)?;
    let package = metadata["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|package| package["name"] == BROWSER_CRATE)
        .with_context(|| format!("cargo metadata lists no {BROWSER_CRATE}"))?;
    let version = package["version"].as_str().context("a version")?;
    let license = package["license"]
        .as_str()
        .with_context(|| format!("{BROWSER_CRATE} names no licence in its Cargo.toml"))?;
    Ok((version.to_owned(), license.to_owned()))
}

fn remove_old_tarballs(out: &Path) -> Result<()> {
    for entry in std::fs::read_dir(out)? {
        let path = entry?.path();
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        if name.starts_with("sealpost-browser-") && name.ends_with(".tgz") {
            std::fs::remove_file(&path)?;
        }
    }
    Ok(())
}

/// Copies the module's top-level `.js` and `.d.ts` files; answers their names, sorted.
fn copy_scripts(module: &Path, staging: &Path) -> Result<Vec<String>> {
    let mut names = Vec::new();
    for entry in std::fs::read_dir(module)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if entry.file_type()?.is_file() && (name.ends_with(".js") || name.ends_with(".d.ts")) {
            std::fs::copy(entry.path(), staging.join(&name))
                .with_context(|| format!("copy {}", entry.path().display()))?;
            names.push(name);
        }
    }
    names.sort();
    Ok(names)
}

/// Copies the wasm and its glue (`.wasm`, `.js`, `.d.ts`).
fn copy_wasm_dir(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if [".wasm", ".js", ".d.ts"]
            .iter()
            .any(|ext| name.ends_with(ext))
        {
            std::fs::copy(entry.path(), to.join(&name))
                .with_context(|| format!("copy {}", entry.path().display()))?;
        }
    }
    Ok(())
}

/// `package.json`: the template, with the version, licence, entry points and files filled in.
/// `scripts` are the file names at the package's top (`.js` and `.d.ts`).
fn package_json(
    template: Value,
    version: &str,
    license: &str,
    scripts: &[String],
) -> Result<Value> {
    let Value::Object(mut manifest) = template else {
        bail!("the package template is not a JSON object");
    };
    for generated in ["version", "license", "exports", "types", "files"] {
        ensure!(
            !manifest.contains_key(generated),
            "the package template sets `{generated}`, which the build fills in"
        );
    }
    let mut exports = serde_json::Map::new();
    for script in scripts {
        let Some(stem) = script.strip_suffix(".js") else {
            continue;
        };
        let declarations = format!("{stem}.d.ts");
        if !scripts.contains(&declarations) {
            continue;
        }
        let key = if stem == MAIN_ENTRY {
            ".".to_owned()
        } else {
            format!("./{stem}")
        };
        exports.insert(
            key,
            json!({ "types": format!("./{declarations}"), "default": format!("./{script}") }),
        );
    }
    ensure!(
        exports.contains_key("."),
        "the module has no {MAIN_ENTRY}.js with {MAIN_ENTRY}.d.ts beside it"
    );
    ensure!(
        scripts.iter().any(|s| s == WORKER),
        "the module has no {WORKER}"
    );
    exports.insert(format!("./{WORKER}"), json!(format!("./{WORKER}")));
    exports.insert("./package.json".to_owned(), json!("./package.json"));
    let mut files: Vec<Value> = scripts.iter().map(|s| json!(s)).collect();
    files.push(json!(format!("{WASM_DIR}/")));
    manifest.insert("version".to_owned(), json!(version));
    manifest.insert("license".to_owned(), json!(license));
    manifest.insert("exports".to_owned(), Value::Object(exports));
    manifest.insert("types".to_owned(), json!(format!("./{MAIN_ENTRY}.d.ts")));
    manifest.insert("files".to_owned(), Value::Array(files));
    Ok(Value::Object(manifest))
}

/// Keys that come first, in this order, wherever they occur in `package.json`; the others
/// follow as they are. An export's `types` must precede `default`: resolvers take the first
/// condition that matches.
const USUAL_ORDER: [&str; 11] = [
    "name",
    "version",
    "description",
    "keywords",
    "license",
    "type",
    "sideEffects",
    "types",
    "default",
    "exports",
    "files",
];

/// A JSON value written with its objects' keys in [`USUAL_ORDER`].
struct InUsualOrder<'a>(&'a Value);

impl Serialize for InUsualOrder<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            Value::Object(object) => {
                let rank = |key: &str| USUAL_ORDER.iter().position(|k| *k == key);
                let mut keys: Vec<&String> = object.keys().collect();
                keys.sort_by_key(|key| rank(key).unwrap_or(USUAL_ORDER.len()));
                let mut map = serializer.serialize_map(Some(keys.len()))?;
                for key in keys {
                    map.serialize_entry(key, &InUsualOrder(&object[key]))?;
                }
                map.end()
            }
            Value::Array(items) => serializer.collect_seq(items.iter().map(InUsualOrder)),
            other => other.serialize(serializer),
        }
    }
}

/// Reads `npm pack --json`'s report: every file the exports name, and the wasm, must be in the
/// tarball. Answers the tarball's file name.
fn check_packed(report: &str, manifest: &Value) -> Result<String> {
    let report: Value = serde_json::from_str(report).context("npm pack --json's report")?;
    let packed = &report[0];
    let files: Vec<&str> = packed["files"]
        .as_array()
        .context("npm pack lists the files it packed")?
        .iter()
        .filter_map(|file| file["path"].as_str())
        .collect();
    let mut needed = vec![
        format!("{WASM_DIR}/sealpost_browser_bg.wasm"),
        format!("{WASM_DIR}/sealpost_browser.js"),
        "README.md".to_owned(),
    ];
    for target in manifest["exports"].as_object().into_iter().flatten() {
        match target.1 {
            Value::String(path) => needed.push(path.trim_start_matches("./").to_owned()),
            Value::Object(conditions) => needed.extend(
                conditions
                    .values()
                    .filter_map(Value::as_str)
                    .map(|path| path.trim_start_matches("./").to_owned()),
            ),
            _ => bail!("an export that is neither a path nor conditions"),
        }
    }
    for path in needed {
        ensure!(
            files.contains(&path.as_str()),
            "the tarball lacks {path} (packed: {files:?})"
        );
    }
    let name = packed["filename"]
        .as_str()
        .context("npm pack names the tarball")?;
    Ok(name.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn template() -> Value {
        serde_json::from_str(
            &std::fs::read_to_string(root().join("crates/browser/npm/package.template.json"))
                .unwrap(),
        )
        .unwrap()
    }

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_script_with_declarations_beside_it_is_an_entry_point_and_the_rest_is_shipped() {
        let scripts = names(&[
            "auth.d.ts",
            "auth.js",
            "sealpost.d.ts",
            "sealpost.js",
            "store.js",
            "worker.js",
        ]);
        let manifest = package_json(template(), "1.2.3", "Apache-2.0", &scripts).unwrap();
        assert_eq!(manifest["version"], "1.2.3");
        assert_eq!(manifest["license"], "Apache-2.0");
        assert_eq!(manifest["type"], "module");
        assert_eq!(manifest["types"], "./sealpost.d.ts");
        assert_eq!(
            manifest["exports"],
            json!({
                ".": { "types": "./sealpost.d.ts", "default": "./sealpost.js" },
                "./auth": { "types": "./auth.d.ts", "default": "./auth.js" },
                "./worker.js": "./worker.js",
                "./package.json": "./package.json",
            })
        );
        assert_eq!(
            manifest["files"],
            json!([
                "auth.d.ts",
                "auth.js",
                "sealpost.d.ts",
                "sealpost.js",
                "store.js",
                "worker.js",
                "pkg/"
            ])
        );
    }

    #[test]
    fn package_json_is_written_in_the_usual_order_with_types_before_default() {
        let scripts = names(&["sealpost.d.ts", "sealpost.js", "worker.js"]);
        let manifest = package_json(template(), "1.2.3", "MIT", &scripts).unwrap();
        let text = serde_json::to_string(&InUsualOrder(&manifest)).unwrap();
        let at = |needle: &str| text.find(needle).unwrap();
        assert!(at("\"name\"") < at("\"version\"") && at("\"version\"") < at("\"exports\""));
        assert!(at("\"types\":\"./sealpost.d.ts\",\"default\"") > at("\"exports\""));
        assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), manifest);
    }

    #[test]
    fn without_its_main_script_or_worker_the_module_does_not_pack() {
        let no_declarations = names(&["sealpost.js", "worker.js"]);
        assert!(package_json(template(), "1.0.0", "MIT", &no_declarations).is_err());
        let no_worker = names(&["sealpost.d.ts", "sealpost.js"]);
        assert!(package_json(template(), "1.0.0", "MIT", &no_worker).is_err());
    }

    #[test]
    fn the_template_may_not_set_what_the_build_fills_in() {
        let mut template = template();
        template["version"] = json!("9.9.9");
        let scripts = names(&["sealpost.d.ts", "sealpost.js", "worker.js"]);
        let error = package_json(template, "1.0.0", "MIT", &scripts).unwrap_err();
        assert!(error.to_string().contains("version"), "{error}");
    }

    #[test]
    fn a_tarball_missing_an_exported_file_is_refused() {
        let scripts = names(&["sealpost.d.ts", "sealpost.js", "worker.js"]);
        let manifest = package_json(template(), "1.0.0", "MIT", &scripts).unwrap();
        let report = |paths: &[&str]| {
            json!([{
                "filename": "sealpost-browser-1.0.0.tgz",
                "files": paths.iter().map(|p| json!({ "path": p })).collect::<Vec<_>>(),
            }])
            .to_string()
        };
        let complete = [
            "package.json",
            "README.md",
            "sealpost.d.ts",
            "sealpost.js",
            "worker.js",
            "pkg/sealpost_browser.js",
            "pkg/sealpost_browser_bg.wasm",
        ];
        assert_eq!(
            check_packed(&report(&complete), &manifest).unwrap(),
            "sealpost-browser-1.0.0.tgz"
        );
        let without_types: Vec<&str> = complete
            .iter()
            .copied()
            .filter(|p| *p != "sealpost.d.ts")
            .collect();
        let error = check_packed(&report(&without_types), &manifest).unwrap_err();
        assert!(error.to_string().contains("sealpost.d.ts"), "{error}");
    }
}
