//! Reading a file the config or the environment names whole — the config
//! itself, a certificate or key, a credentials file — up to a bound: a
//! path that names an endless stream (`/dev/zero`, `/dev/urandom`) or a
//! file far larger than any of its kind is an error that says so, not all
//! of memory taken.

use std::io::{self, Read};
use std::path::Path;

/// The bytes of the file at `path`, if there are at most `max_bytes` (a
/// whole number of MiB, as the refusal says).
pub(crate) fn read_at_most(path: impl AsRef<Path>, max_bytes: u64) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    std::fs::File::open(path)?
        .take(max_bytes + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max_bytes {
        let over = format!(
            "it holds over {} MiB, more than any file of its kind",
            max_bytes >> 20
        );
        return Err(io::Error::new(io::ErrorKind::FileTooLarge, over));
    }
    Ok(bytes)
}

/// The text of the file at `path`, if it is UTF-8 of at most `max_bytes`.
pub(crate) fn read_text_at_most(path: impl AsRef<Path>, max_bytes: u64) -> io::Result<String> {
    String::from_utf8(read_at_most(path, max_bytes)?).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            "stream did not contain valid UTF-8",
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_over_the_bound_or_an_endless_stream_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        const MIB: u64 = 1 << 20;
        std::fs::write(&file, vec![b'x'; 2 << 20]).unwrap();
        assert_eq!(read_at_most(&file, 2 * MIB).unwrap().len(), 2 << 20);
        assert_eq!(read_text_at_most(&file, 2 * MIB).unwrap().len(), 2 << 20);
        for path in [file.as_path(), Path::new("/dev/zero")] {
            let refused = read_at_most(path, MIB).unwrap_err();
            assert_eq!(refused.kind(), io::ErrorKind::FileTooLarge);
            assert_eq!(
                refused.to_string(),
                "it holds over 1 MiB, more than any file of its kind"
            );
        }
        std::fs::write(&file, [0xff]).unwrap();
        let not_text = read_text_at_most(&file, MIB).unwrap_err();
        assert_eq!(not_text.to_string(), "stream did not contain valid UTF-8");
    }
}
