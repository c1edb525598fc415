//! The directory a recording goes into, made ready before anything streams: a real
//! directory of this user's (made if absent, never reached through a link), empty — or,
//! when asked, holding only an earlier recording, which is removed — and writable.

use std::io;
use std::path::Path;

/// Why a directory cannot take a recording.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DirError {
    /// It is not a directory of this user's, or cannot be made or read.
    #[error(transparent)]
    Own(io::Error),
    /// It holds files and replacing was not asked for.
    #[error(
        "the directory is not empty ({0} entries); choose another, or ask to replace the recording in it"
    )]
    NotEmpty(usize),
    /// Replacing was asked for, but it holds something other than a recording.
    #[error("only a recording is replaced, and this directory holds other files")]
    NotARecording,
    /// An earlier recording's file could not be removed.
    #[error("cannot remove {path}")]
    Remove {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// Nothing can be written there.
    #[error("cannot write there")]
    NotWritable(#[source] io::Error),
}

/// Make `dir` ready for a new recording; with `replace`, an earlier recording in it is
/// removed (a link inside is removed itself, never followed).
pub fn prepare_dir(dir: &Path, replace: bool) -> Result<(), DirError> {
    rocelink_io::file::own_dir(dir, 0o755).map_err(DirError::Own)?;
    let entries: Vec<_> = std::fs::read_dir(dir)
        .map_err(DirError::Own)?
        .filter_map(Result::ok)
        .collect();
    if !entries.is_empty() {
        if !replace {
            return Err(DirError::NotEmpty(entries.len()));
        }
        if !dir.join("recording.json").exists() {
            return Err(DirError::NotARecording);
        }
        for e in entries {
            let path = e.path();
            let is_dir = std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_dir());
            let r = if is_dir {
                std::fs::remove_dir_all(&path)
            } else {
                std::fs::remove_file(&path)
            };
            r.map_err(|source| DirError::Remove { path, source })?;
        }
    }
    let probe = dir.join(".rocelink-write-test");
    rocelink_io::file::write_atomic(&probe, b"").map_err(DirError::NotWritable)?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_earlier_recording_is_replaced() {
        let base = std::env::temp_dir().join(format!("rocelink-dir-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let d = base.join("rec");
        prepare_dir(&d, false).unwrap();
        assert!(d.is_dir(), "made");
        std::fs::write(d.join("other"), b"x").unwrap();
        assert!(matches!(prepare_dir(&d, false), Err(DirError::NotEmpty(1))));
        assert!(matches!(
            prepare_dir(&d, true),
            Err(DirError::NotARecording)
        ));
        std::fs::write(d.join("recording.json"), b"{}").unwrap();
        prepare_dir(&d, true).unwrap();
        assert_eq!(std::fs::read_dir(&d).unwrap().count(), 0, "replaced");
        let link = base.join("link");
        std::os::unix::fs::symlink(&d, &link).unwrap();
        assert!(
            matches!(prepare_dir(&link, false), Err(DirError::Own(_))),
            "never a link"
        );
        std::fs::remove_dir_all(&base).unwrap();
    }
}
