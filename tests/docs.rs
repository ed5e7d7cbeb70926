//! The README and the pages under `docs/` link to each other: every
//! relative link names a file that exists and, after `#`, a heading of it.

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

#[test]
fn every_relative_link_of_the_docs_names_a_file_and_heading_that_exist() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut pages = vec![root.join("README.md")];
    for entry in std::fs::read_dir(root.join("docs")).unwrap() {
        pages.push(entry.unwrap().path());
    }
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

#[test]
fn anchors_are_githubs() {
    assert_eq!(
        anchor(" What a Pub/Sub topic receives"),
        "what-a-pubsub-topic-receives"
    );
    assert_eq!(anchor(" `goad-sink`: a receiver"), "goad-sink-a-receiver");
}
