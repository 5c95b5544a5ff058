//! What the runner tests share: options writing under a scratch directory,
//! hidden progress bars, and target binaries built where the runner builds
//! them (`target/variants`), so the main job after the tests reuses the
//! variants the tests compiled. A running measurement is safe from a test
//! run's rebuild all the same: it runs private copies of its binaries
//! (`Binaries::get`), never the files cargo replaces.

use analysis::run::runner::{Binaries, Options};
use indicatif::{MultiProgress, ProgressDrawTarget};
use std::path::Path;

pub fn setup(out: &Path, label: &str) -> (Options, MultiProgress, Binaries) {
    let root = analysis::default_root();
    let opts = Options {
        root: root.clone(),
        data: out.join("data"),
        scale: analysis::spec::Scale::Quick,
        fresh: false,
        // NOTE: tests are not measurements; a developer's tree may be dirty.
        allow_dirty: true,
        command_line: vec![label.into()],
        pair_counting: true,
        records: analysis::data::dataset::parquet_sink,
    };
    let multi = MultiProgress::with_draw_target(ProgressDrawTarget::hidden());
    (opts, multi, Binaries::default())
}
