//! The provider's modules form layers (docs/ARCHITECTURE.md): no module
//! reaches, through `crate::` paths, a module that reaches back to it.
//! Modules that only add methods to `Provider` (`session`, `replication`,
//! …) depend on `provider`, never the other way round. A new import that
//! closes a circle fails here with the circle named.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Top-level module → the top-level modules its non-test code names.
fn module_graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let rel = path.strip_prefix(src).unwrap();
            let top = rel
                .components()
                .next()
                .unwrap()
                .as_os_str()
                .to_string_lossy()
                .trim_end_matches(".rs")
                .to_string();
            if top == "lib" || top == "tests" {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            // Unit tests may reach anywhere.
            let code = text.split("#[cfg(test)]\nmod tests").next().unwrap();
            let deps = graph.entry(top.clone()).or_default();
            for (at, _) in code.match_indices("crate::") {
                let name: String = code[at + 7..]
                    .chars()
                    .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                    .collect();
                // `log` is the leaf every module logs through.
                if !name.is_empty() && name != top && name != "log" {
                    deps.insert(name);
                }
            }
        }
    }
    graph
}

/// A path from `from` back to itself, if there is one.
fn circle_through(graph: &BTreeMap<String, BTreeSet<String>>, from: &str) -> Option<Vec<String>> {
    let mut stack = vec![vec![from.to_string()]];
    let mut seen = BTreeSet::new();
    while let Some(path) = stack.pop() {
        let last = path.last().unwrap();
        for next in graph.get(last).into_iter().flatten() {
            if next == from {
                let mut circle = path.clone();
                circle.push(next.clone());
                return Some(circle);
            }
            if graph.contains_key(next) && seen.insert(next.clone()) {
                let mut longer = path.clone();
                longer.push(next.clone());
                stack.push(longer);
            }
        }
    }
    None
}

#[test]
fn no_module_imports_one_that_imports_it_back() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let graph = module_graph(&src);
    assert!(graph.len() > 20, "modules not found: {graph:?}");
    assert!(
        graph["provider"].contains("group_driver"),
        "the graph misses known edges: {graph:?}"
    );
    let circles: Vec<String> = graph
        .keys()
        .filter_map(|m| circle_through(&graph, m))
        .map(|c| c.join(" -> "))
        .collect();
    assert!(circles.is_empty(), "import circles: {circles:#?}");
}
