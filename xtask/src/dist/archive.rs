//! Archives that come out the same from the same inputs: entries in a fixed order, one
//! timestamp (`SOURCE_DATE_EPOCH`, else the last commit's), no owner names, modes as given.

use std::fs::File;
use std::io::Write as _;
use std::path::Path;

use anyhow::{Context as _, Result};
use zip::write::SimpleFileOptions;

use crate::cmd::cmd;

/// One file of an archive: its path inside, its bytes, its Unix mode.
#[derive(Debug)]
pub struct Entry {
    pub path: String,
    pub bytes: Vec<u8>,
    pub mode: u32,
}

impl Entry {
    pub fn file(path: impl Into<String>, bytes: impl Into<Vec<u8>>) -> Self {
        Self {
            path: path.into(),
            bytes: bytes.into(),
            mode: 0o644,
        }
    }

    pub fn executable(path: impl Into<String>, bytes: impl Into<Vec<u8>>) -> Self {
        Self {
            mode: 0o755,
            ..Self::file(path, bytes)
        }
    }
}

/// Every file under `dir`, as entries under `prefix/`, sorted.
pub fn tree(dir: &Path, prefix: &str) -> Result<Vec<Entry>> {
    let mut entries = Vec::new();
    walk(dir, prefix, &mut entries)?;
    entries.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(entries)
}

fn walk(dir: &Path, prefix: &str, into: &mut Vec<Entry>) -> Result<()> {
    for entry in std::fs::read_dir(dir).with_context(|| dir.display().to_string())? {
        let entry = entry?;
        let name = format!("{prefix}/{}", entry.file_name().to_string_lossy());
        if entry.file_type()?.is_dir() {
            walk(&entry.path(), &name, into)?;
        } else {
            into.push(Entry::file(name, std::fs::read(entry.path())?));
        }
    }
    Ok(())
}

/// The time every entry carries: `SOURCE_DATE_EPOCH` when set (reproducible-builds.org),
/// otherwise the last commit's.
pub fn source_date() -> Result<u64> {
    if let Ok(epoch) = std::env::var("SOURCE_DATE_EPOCH") {
        return epoch
            .trim()
            .parse()
            .context("SOURCE_DATE_EPOCH is not a number");
    }
    let committed = cmd("git", &["log", "-1", "--format=%ct"]).read()?;
    committed
        .trim()
        .parse()
        .context("the last commit's time is not a number")
}

/// A `.tar.gz` of `entries`.
pub fn tar_gz(out: &Path, entries: &[Entry]) -> Result<()> {
    let mtime = source_date()?;
    let gz = flate2::write::GzEncoder::new(
        File::create(out).with_context(|| out.display().to_string())?,
        flate2::Compression::best(),
    );
    let mut tar = tar::Builder::new(gz);
    tar.mode(tar::HeaderMode::Deterministic);
    for entry in entries {
        let mut header = tar::Header::new_gnu();
        header.set_size(entry.bytes.len() as u64);
        header.set_mode(entry.mode);
        header.set_mtime(mtime);
        header.set_uid(0);
        header.set_gid(0);
        header.set_entry_type(tar::EntryType::Regular);
        tar.append_data(&mut header, &entry.path, entry.bytes.as_slice())?;
    }
    tar.into_inner()?.finish()?.flush()?;
    Ok(())
}

/// A zip of `entries` (wheels, bundles, Windows archives), each mode kept.
pub fn zip(out: &Path, entries: &[Entry]) -> Result<()> {
    let mtime = source_date()?;
    let when = zip_time(mtime)?;
    let mut zip =
        zip::ZipWriter::new(File::create(out).with_context(|| out.display().to_string())?);
    for entry in entries {
        let options = SimpleFileOptions::default()
            .unix_permissions(entry.mode)
            .last_modified_time(when)
            .compression_method(zip::CompressionMethod::Deflated);
        zip.start_file(entry.path.as_str(), options)?;
        zip.write_all(&entry.bytes)?;
    }
    zip.finish()?;
    Ok(())
}

/// Zip's DOS time of a Unix time (UTC); zip cannot say a time before 1980.
fn zip_time(unix: u64) -> Result<zip::DateTime> {
    let days = unix / 86_400;
    let seconds = unix % 86_400;
    let (year, month, day) = civil_from_days(days as i64);
    zip::DateTime::from_date_and_time(
        u16::try_from(year.max(1980))?,
        month,
        day,
        (seconds / 3600) as u8,
        (seconds / 60 % 60) as u8,
        (seconds % 60) as u8,
    )
    .map_err(|e| anyhow::anyhow!("no zip time for {unix}: {e}"))
}

/// Howard Hinnant's days-to-civil: the proleptic Gregorian date of a day count since 1970.
fn civil_from_days(days: i64) -> (i64, u8, u8) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u8;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u8;
    (yoe + era * 400 + i64::from(month <= 2), month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn days_turn_into_the_calendar_date() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(19_723), (2024, 1, 1));
        assert_eq!(civil_from_days(20_429), (2025, 12, 7));
    }

    #[test]
    fn the_same_entries_make_the_same_archive() {
        let dir = tempdir();
        let entries = || {
            vec![
                Entry::executable("a/bin", b"\x7fELF".to_vec()),
                Entry::file("a/readme", b"hi".to_vec()),
            ]
        };
        for (name, write) in [
            ("x.tar.gz", tar_gz as fn(&Path, &[Entry]) -> Result<()>),
            ("x.zip", zip),
        ] {
            let (one, two) = (dir.join(format!("1{name}")), dir.join(format!("2{name}")));
            write(&one, &entries()).unwrap();
            write(&two, &entries()).unwrap();
            assert_eq!(
                std::fs::read(&one).unwrap(),
                std::fs::read(&two).unwrap(),
                "{name}"
            );
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    fn tempdir() -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("sealpost-archive-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }
}
