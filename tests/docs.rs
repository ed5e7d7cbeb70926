//! The README and the pages under `docs/` link to each other: every
//! relative link names a file that exists and, after `#`, a heading of it.
//! The README's embedding program is the crate page's, which runs as a
//! doc test, every TOML block is a valid config, and the HTTP API's page
//! names every error code the node answers with.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// GitHub's anchor for a heading: lower case, spaces to hyphens, other
/// punctuation dropped.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

fn anchors(text: &str) -> BTreeSet<String> {
    let mut in_code = false;
    let mut found = BTreeSet::new();
    for line in text.lines() {
        if line.starts_with("```") {
            in_code = !in_code;
        } else if !in_code && line.starts_with('#') {
            found.insert(anchor(line.trim_start_matches('#')));
        }
    }
    found
}

/// The targets of `](target)` links that are not URLs.
fn relative_links(text: &str) -> Vec<String> {
    text.split("](")
        .skip(1)
        .filter_map(|rest| rest.split(')').next())
        .filter(|target| !target.contains("://") && !target.starts_with("mailto:"))
        .map(str::to_string)
        .collect()
}

/// The README and the pages under `docs/`.
fn pages() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut pages = vec![root.join("README.md")];
    for entry in std::fs::read_dir(root.join("docs")).unwrap() {
        pages.push(entry.unwrap().path());
    }
    pages
}

#[test]
fn every_relative_link_of_the_docs_names_a_file_and_heading_that_exist() {
    let pages = pages();
    let mut checked = 0;
    for page in &pages {
        let text = std::fs::read_to_string(page).unwrap();
        for link in relative_links(&text) {
            let (file, heading) = link.split_once('#').unwrap_or((&link, ""));
            let target: PathBuf = match file {
                "" => page.clone(),
                file => page.parent().unwrap().join(file),
            };
            assert!(target.exists(), "{}: {link} names no file", page.display());
            if !heading.is_empty() {
                let target_text = std::fs::read_to_string(&target).unwrap();
                assert!(
                    anchors(&target_text).contains(heading),
                    "{}: {link} names no heading of {}",
                    page.display(),
                    target.display()
                );
            }
            checked += 1;
        }
    }
    assert!(checked >= 10, "only {checked} links found");
}

/// Every TOML block of the docs is a config `goad check` takes, as an
/// operator would copy it: a block of sink tables (`[[sources.sinks]]`)
/// under a source of its own.
#[test]
fn every_toml_block_of_the_docs_is_a_valid_config() {
    let mut checked = 0;
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        for block in text.split("```toml\n").skip(1) {
            let block = &block[..block.find("```").expect("the block's end")];
            let config = match block.trim_start().starts_with("[[sources.sinks]]") {
                true => format!("[[sources]]\nid = \"a\"\n{block}"),
                false => block.to_string(),
            };
            let checked_config = goad::Config::from_toml(&config).and_then(|c| c.validate());
            if let Err(e) = checked_config {
                panic!(
                    "{}: a TOML block is no valid config: {e}\n{block}",
                    page.display()
                );
            }
            checked += 1;
        }
    }
    assert!(checked >= 3, "only {checked} TOML blocks found");
}

#[test]
fn anchors_are_githubs() {
    assert_eq!(
        anchor(" What a Pub/Sub topic receives"),
        "what-a-pubsub-topic-receives"
    );
    assert_eq!(anchor(" `goad-sink`: a receiver"), "goad-sink-a-receiver");
}

/// The scenario numbers a text names: each number of a run that follows
/// "Scenario"/"Scenarios" (any case), as in "Scenarios 38, 41, 42 and 44"
/// or "scenarios 57–66".
fn scenario_numbers(text: &str) -> BTreeSet<u32> {
    let mut found = BTreeSet::new();
    let lower = text.to_lowercase();
    for after in lower.split("scenario").skip(1) {
        let run = after.trim_start_matches('s').trim_start();
        let end = run
            .find(|c: char| !(c.is_ascii_digit() || " ,–-and".contains(c)))
            .unwrap_or(run.len());
        let run = &run[..end];
        for part in run
            .split([',', ' '])
            .filter(|p| !p.is_empty() && *p != "and")
        {
            match part.split_once(['–', '-']) {
                Some((a, b)) => {
                    if let (Ok(a), Ok(b)) = (a.parse::<u32>(), b.parse::<u32>()) {
                        found.extend(a..=b);
                    }
                }
                None => found.extend(part.parse::<u32>().ok()),
            }
        }
    }
    found
}

/// Calls `visit` with the text of every Rust file under `dir`.
fn each_rust_file(dir: &Path, visit: &mut impl FnMut(&str)) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            each_rust_file(&path, visit);
        } else if path.extension().is_some_and(|e| e == "rs") {
            visit(&std::fs::read_to_string(&path).unwrap());
        }
    }
}

/// The comments (`//` lines, docs included) of every Rust file under `dir`.
fn comments(dir: &Path, into: &mut String) {
    each_rust_file(dir, &mut |text| {
        for line in text.lines().map(str::trim_start) {
            if let Some(doc) = line.strip_prefix("//") {
                into.push_str(doc);
                into.push('\n');
            }
        }
    });
}

/// The error codes a node's answers carry: the string literal each
/// `Response::error(…)` and `Response::unavailable(…)` call outside the
/// files' unit tests gives.
fn answered_error_codes(dir: &Path) -> BTreeSet<String> {
    let mut codes = BTreeSet::new();
    each_rust_file(dir, &mut |text| {
        let code = text.split("#[cfg(test)]").next().unwrap();
        for call in ["Response::error(", "Response::unavailable("] {
            // The code is the first argument that is a literal, before
            // any `)`; `Response::error(503, code, …)` passes one along.
            for after in code.split(call).skip(1) {
                let arguments = after.split(')').next().unwrap();
                if let Some(literal) = arguments.split('"').nth(1) {
                    codes.insert(literal.to_string());
                }
            }
        }
    });
    codes
}

/// Every error code the node answers with is named in `docs/http-api.md`,
/// where a client's author or an operator looks it up.
#[test]
fn every_error_code_the_node_answers_is_in_the_http_api_page() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let page = std::fs::read_to_string(root.join("docs/http-api.md")).unwrap();
    let codes = answered_error_codes(&root.join("src"));
    assert!(
        codes.contains("unknown_source") && codes.len() > 40,
        "{codes:?}"
    );
    let missing: Vec<&String> = codes
        .iter()
        .filter(|code| !page.contains(&format!("`{code}`")))
        .collect();
    assert_eq!(
        missing,
        Vec::<&String>::new(),
        "codes docs/http-api.md does not name"
    );
}

/// Every one of the reference's 70 scenarios is named by a test's comment
/// or listed, with why, in `docs/reference-scenarios.md`.
#[test]
fn every_reference_scenario_is_ported_or_explained() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut docs = String::new();
    comments(&root.join("tests"), &mut docs);
    comments(&root.join("src"), &mut docs);
    let ported = scenario_numbers(&docs);
    let page = std::fs::read_to_string(root.join("docs/reference-scenarios.md")).unwrap();
    let explained: BTreeSet<u32> = page
        .lines()
        .filter_map(|line| line.strip_prefix("| "))
        .filter_map(|row| row.split(' ').next()?.parse().ok())
        .collect();
    let missing: Vec<u32> = (1..=70)
        .filter(|n| !ported.contains(n) && !explained.contains(n))
        .collect();
    assert_eq!(
        missing,
        Vec::<u32>::new(),
        "scenarios neither ported nor explained"
    );
    let both: Vec<&u32> = explained.intersection(&ported).collect();
    assert_eq!(
        both,
        Vec::<&u32>::new(),
        "explained as not ported, yet named by a test"
    );
    assert_eq!(
        scenario_numbers("Scenarios 38, 41, 42, 44; scenario 7 (D6); scenarios 57–66"),
        [7, 38, 41, 42, 44].into_iter().chain(57..=66).collect()
    );
}

/// The first `rust` code block after `## Embedding` in the README.
fn readme_embedding_program(readme: &str) -> String {
    let section = readme
        .split_once("\n## Embedding\n")
        .expect("the README has an Embedding section")
        .1;
    let block = section
        .split_once("```rust\n")
        .expect("the Embedding section has a rust block")
        .1;
    block
        .split_once("```")
        .expect("the block ends")
        .0
        .to_string()
}

/// The crate page's doc test: `//!` lines between its first two fences.
fn crate_page_program(lib: &str) -> String {
    let lines: Vec<&str> = lib.lines().take_while(|l| l.starts_with("//!")).collect();
    let fences: Vec<usize> = (0..lines.len())
        .filter(|&i| lines[i] == "//! ```")
        .collect();
    assert!(fences.len() >= 2, "src/lib.rs's docs hold a fenced example");
    lines[fences[0] + 1..fences[1]]
        .iter()
        .map(|l| format!("{}\n", l.strip_prefix("//! ").unwrap_or("")))
        .collect()
}

#[test]
fn the_readmes_embedding_program_is_the_one_the_doc_test_runs() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let lib = std::fs::read_to_string(root.join("src/lib.rs")).unwrap();
    let program = crate_page_program(&lib);
    assert!(program.contains("fn main()"), "{program}");
    assert_eq!(readme_embedding_program(&readme), program);
}
