//! The plugin's files: the pairing (the pairing code itself, 0600) and the cached catalog of
//! the last verified hello, in the platform's config folder (`SEALPOST_CONFIG_DIR` overrides).
//! The cached catalog also carries the highest catalog update each live session has shown, so
//! every process of the pairing refuses what one of them has seen superseded; processes read,
//! judge and write it one at a time under an advisory lock on `catalog.lock`.
//!
//! A stored file read back is input: the pairing is parsed with seal's parser on every load,
//! and a file that is not ours, not a regular file, or does not parse is reported with what to
//! do, never trusted, never waited on and never a panic. An unreadable catalog reads as no
//! catalog.
//!
//! The folder must be the user's own: on Unix one owned by another user is refused, and one
//! that others may write to is tightened to 0700 with a warning (another user could otherwise
//! swap the pairing). Files are written under a fresh random name created exclusively (never
//! through a link someone planted), then renamed into place.

use std::fs::{self, File, OpenOptions};
use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};

use sealpost_protocol::content::CatalogEntry;
use sealpost_protocol::ids::{PairId, SessionId};
use sealpost_seal::PairingCode;
use sealpost_time::UnixMillis;
use serde::{Deserialize, Serialize};
use zeroize::{Zeroize as _, Zeroizing};

/// Environment variable naming the config folder (tests, portable installs).
pub const CONFIG_DIR_ENV: &str = "SEALPOST_CONFIG_DIR";
/// The pairing file's name inside the config folder.
pub const PAIRING_FILE: &str = "pairing.json";
/// The cached catalog's name inside the config folder.
pub const CATALOG_FILE: &str = "catalog.json";
/// The file whose lock serialises reading, judging and writing the cached catalog.
pub const CATALOG_LOCK_FILE: &str = "catalog.lock";
/// How many sessions' highest catalog updates are kept: sessions end when the tab starts
/// another, so only a few are ever live at once.
pub const MAX_SESSIONS_KEPT: usize = 16;
/// Larger files are not ours: a pairing is under 5 KiB, a catalog under the hello's 64 KiB.
const MAX_FILE_BYTES: u64 = 256 * 1024;

const PAIRING_FORMAT: &str = "sealpost-pairing";
const CATALOG_FORMAT: &str = "sealpost-catalog";
const FORMAT_VERSION: u32 = 1;

/// Why the pairing could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// No pairing file: the plugin is not paired.
    #[error("This plugin is not paired yet.")]
    NotPaired,
    /// The file exists but is not a pairing this plugin wrote.
    #[error(
        "The pairing file {path} is damaged or was not written by sealpost ({why}). Run `sealpost pair --replace` with a new pairing code from the Sealpost tab."
    )]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong with it, without its content.
        why: String,
    },
    /// Reading or writing failed.
    #[error("Could not use {path}: {source}.")]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The folder belongs to another user: a pairing there is not ours to trust.
    #[error(
        "The configuration folder {path} belongs to another user, so sealpost will not keep or read a pairing there. Set {CONFIG_DIR_ENV} to a folder of your own."
    )]
    ForeignFolder {
        /// The folder.
        path: PathBuf,
    },
    /// No config folder could be determined.
    #[error("No configuration folder could be found; set {CONFIG_DIR_ENV} to a folder.")]
    NoConfigDir,
}

/// Where the plugin keeps its files.
#[derive(Debug, Clone)]
pub struct ConfigDir(PathBuf);

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct PairingFile {
    format: String,
    version: u32,
    code: String,
}

/// The catalog of the last hello that verified, for `tools/list` without the network.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CachedCatalog {
    format: String,
    version: u32,
    /// The pairing whose hello carried it; a catalog of another pairing is ignored.
    pub pair_id: PairId,
    /// The tools, as the tab offered them (filtered when listed).
    pub tools: Vec<CatalogEntry>,
    /// The session whose catalog `tools` is; absent in a file written before it was kept.
    #[serde(default)]
    pub session_id: Option<SessionId>,
    /// The number of the catalog update `tools` came from (0: the session's hello).
    #[serde(default)]
    pub seq: u64,
    /// The highest catalog update opened for each session that has not ended.
    #[serde(default)]
    pub opened: Vec<OpenedUpdate>,
}

/// The highest catalog update any process of the pairing opened for one session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpenedUpdate {
    /// The session.
    pub session_id: SessionId,
    /// Its highest catalog update's number.
    pub seq: u64,
    /// When the session ends, by its hello; after that the entry is dropped.
    pub expires_at: UnixMillis,
}

impl CachedCatalog {
    /// A catalog for `pair_id` with no session recorded.
    pub fn new(pair_id: PairId, tools: Vec<CatalogEntry>) -> Self {
        Self {
            format: CATALOG_FORMAT.into(),
            version: FORMAT_VERSION,
            pair_id,
            tools,
            session_id: None,
            seq: 0,
            opened: Vec::new(),
        }
    }

    /// The highest catalog update opened for `session`, 0 when none.
    pub fn highest_opened(&self, session: SessionId) -> u64 {
        let recorded = self
            .opened
            .iter()
            .filter(|o| o.session_id == session)
            .map(|o| o.seq);
        let cached = (self.session_id == Some(session)).then_some(self.seq);
        recorded.chain(cached).max().unwrap_or(0)
    }
}

impl ConfigDir {
    /// `SEALPOST_CONFIG_DIR`, else the platform's config folder for sealpost.
    pub fn locate() -> Result<Self, ConfigError> {
        if let Some(dir) = std::env::var_os(CONFIG_DIR_ENV).filter(|d| !d.is_empty()) {
            return Ok(Self(PathBuf::from(dir)));
        }
        directories::ProjectDirs::from("", "", "sealpost")
            .map(|dirs| Self(dirs.config_dir().to_path_buf()))
            .ok_or(ConfigError::NoConfigDir)
    }

    /// A config folder at `path`.
    pub fn at(path: impl Into<PathBuf>) -> Self {
        Self(path.into())
    }

    /// The folder.
    pub fn path(&self) -> &Path {
        &self.0
    }

    fn pairing_path(&self) -> PathBuf {
        self.0.join(PAIRING_FILE)
    }

    /// Loads and validates the pairing.
    pub fn load_pairing(&self) -> Result<PairingCode, ConfigError> {
        self.check_folder()?;
        let path = self.pairing_path();
        let Some(bytes) = read_bounded(&path)? else {
            return Err(ConfigError::NotPaired);
        };
        let corrupt = |why: &str| ConfigError::Corrupt {
            path: path.clone(),
            why: why.into(),
        };
        let mut file: PairingFile =
            serde_json::from_slice(&bytes).map_err(|_| corrupt("not a sealpost pairing file"))?;
        let checked = if file.format != PAIRING_FORMAT {
            Err(corrupt("not a sealpost pairing file"))
        } else if file.version != FORMAT_VERSION {
            Err(corrupt("written by another version of sealpost"))
        } else {
            PairingCode::parse(&file.code).map_err(|e| corrupt(&format!("its code: {e}")))
        };
        file.code.zeroize();
        checked
    }

    /// Stores `code` as the pairing (0600, written whole or not at all).
    pub fn save_pairing(&self, code: &PairingCode) -> Result<(), ConfigError> {
        let file = PairingFile {
            format: PAIRING_FORMAT.into(),
            version: FORMAT_VERSION,
            code: code.encode().to_string(),
        };
        let mut file = file;
        let text = Zeroizing::new(serde_json::to_vec_pretty(&file).expect("serialisable"));
        file.code.zeroize();
        self.write_private(&self.pairing_path(), &text)
    }

    /// Deletes the pairing and the cached catalog. Whether a pairing was there.
    pub fn remove_pairing(&self) -> Result<bool, ConfigError> {
        let _ = fs::remove_file(self.0.join(CATALOG_FILE));
        let _ = fs::remove_file(self.0.join(CATALOG_LOCK_FILE));
        let path = self.pairing_path();
        match fs::remove_file(&path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(source) => Err(ConfigError::Io { path, source }),
        }
    }

    /// The cached catalog for `pair_id`, or `None` when absent, unreadable or another pairing's.
    pub fn load_catalog(&self, pair_id: PairId) -> Option<CachedCatalog> {
        let bytes = read_bounded(&self.0.join(CATALOG_FILE)).ok()??;
        let catalog: CachedCatalog = serde_json::from_slice(&bytes).ok()?;
        (catalog.format == CATALOG_FORMAT
            && catalog.version == FORMAT_VERSION
            && catalog.pair_id == pair_id)
            .then_some(catalog)
    }

    /// Caches a catalog (0600, written whole or not at all).
    pub fn save_catalog(&self, catalog: &CachedCatalog) -> Result<(), ConfigError> {
        let text = serde_json::to_vec(catalog).expect("serialisable");
        self.write_private(&self.0.join(CATALOG_FILE), &text)
    }

    /// Reads the cached catalog for `pair_id`, lets `judge` decide, and writes the catalog it
    /// returns, all under the folder's catalog lock: another process of the pairing cannot
    /// write between the read and the write, so a higher number it recorded is never lost.
    pub fn update_catalog<T>(
        &self,
        pair_id: PairId,
        judge: impl FnOnce(Option<&CachedCatalog>) -> (Option<CachedCatalog>, T),
    ) -> Result<T, ConfigError> {
        let path = self.0.join(CATALOG_LOCK_FILE);
        let io = |source| ConfigError::Io {
            path: path.clone(),
            source,
        };
        create_private_dir(&self.0).map_err(|source| ConfigError::Io {
            path: self.0.clone(),
            source,
        })?;
        self.check_folder()?;
        let mut options = OpenOptions::new();
        options.create(true).truncate(false).write(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt as _;
            options.mode(0o600).custom_flags(
                (rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::NONBLOCK).bits() as i32,
            );
        }
        let lock = options.open(&path).map_err(io)?;
        // Released when `lock` closes, whichever way this returns.
        lock.lock().map_err(io)?;
        let cached = self.load_catalog(pair_id);
        let (write, judged) = judge(cached.as_ref());
        if let Some(catalog) = write.filter(|w| Some(w) != cached.as_ref()) {
            self.save_catalog(&catalog)?;
        }
        Ok(judged)
    }

    /// Writes `bytes` to a fresh temporary file only the user may read (a random name, created
    /// exclusively: a link planted in the folder is never followed), then renames it over
    /// `path`, so a reader sees the old file or the new one, never half of one.
    fn write_private(&self, path: &Path, bytes: &[u8]) -> Result<(), ConfigError> {
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| ConfigError::Io { path, source }
        };
        create_private_dir(&self.0).map_err(io(&self.0))?;
        self.check_folder()?;
        let mut file = tempfile::Builder::new()
            .prefix(".sealpost-")
            .suffix(".tmp")
            .tempfile_in(&self.0)
            .map_err(io(&self.0))?;
        file.write_all(bytes).map_err(io(file.path()))?;
        file.as_file().sync_all().map_err(io(file.path()))?;
        file.persist(path).map_err(|e| io(path)(e.error))?;
        Ok(())
    }

    /// Refuses a folder another user owns and tightens one others may write to (Unix); a
    /// folder that does not exist yet is fine.
    fn check_folder(&self) -> Result<(), ConfigError> {
        #[cfg(unix)]
        {
            use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
            let Ok(metadata) = fs::metadata(&self.0) else {
                return Ok(());
            };
            if metadata.uid() != rustix::process::geteuid().as_raw() {
                return Err(ConfigError::ForeignFolder {
                    path: self.0.clone(),
                });
            }
            let mode = metadata.mode() & 0o7777;
            if mode & 0o022 != 0 {
                let tightened = fs::set_permissions(&self.0, fs::Permissions::from_mode(0o700));
                match tightened {
                    Ok(()) => tracing::warn!(
                        folder = %self.0.display(),
                        "the configuration folder could be written by other users (mode {mode:o}); it is now 700"
                    ),
                    Err(source) => {
                        return Err(ConfigError::Io {
                            path: self.0.clone(),
                            source,
                        });
                    }
                }
            }
        }
        Ok(())
    }
}

fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

/// Opens `path` for reading without blocking on a FIFO or device someone put there.
fn open_without_blocking(path: &Path) -> std::io::Result<File> {
    let mut options = OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(
        &mut options,
        rustix::fs::OFlags::NONBLOCK.bits() as i32,
    );
    options.open(path)
}

/// The file's bytes, `None` when it does not exist; a file over the bound is refused unread.
fn read_bounded(path: &Path) -> Result<Option<Vec<u8>>, ConfigError> {
    let file = match open_without_blocking(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(ConfigError::Io {
                path: path.to_path_buf(),
                source,
            });
        }
    };
    let regular = file.metadata().is_ok_and(|m| m.is_file());
    if !regular {
        return Err(ConfigError::Corrupt {
            path: path.to_path_buf(),
            why: "not a regular file".into(),
        });
    }
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|source| ConfigError::Io {
            path: path.to_path_buf(),
            source,
        })?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(ConfigError::Corrupt {
            path: path.to_path_buf(),
            why: "far larger than a pairing".into(),
        });
    }
    Ok(Some(bytes))
}

#[cfg(all(test, unix))]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use sealpost_seal::{PairingSecret, RelayOrigin};

    use super::*;

    fn code() -> PairingCode {
        let origin = RelayOrigin::parse("https://relay.example").unwrap();
        PairingCode::new(origin, "h.p.s", PairingSecret::generate(&mut rand::rng())).unwrap()
    }

    fn folder() -> (tempfile::TempDir, ConfigDir) {
        let dir = tempfile::tempdir().unwrap();
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o700)).unwrap();
        let config = ConfigDir::at(dir.path());
        (dir, config)
    }

    #[test]
    fn a_link_planted_at_the_temporary_name_is_not_followed() {
        let (dir, config) = folder();
        let outside = tempfile::NamedTempFile::new().unwrap();
        // The name the file used to be written under, predictable from the process id.
        let planted = dir
            .path()
            .join(format!("pairing.tmp-{}", std::process::id()));
        std::os::unix::fs::symlink(outside.path(), &planted).unwrap();
        let code = code();
        config.save_pairing(&code).unwrap();
        assert_eq!(
            fs::read(outside.path()).unwrap(),
            b"",
            "nothing written through the link"
        );
        assert_eq!(config.load_pairing().unwrap().encode(), code.encode());
        let mode = fs::metadata(dir.path().join(PAIRING_FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn a_pairing_file_that_is_not_a_regular_file_is_damaged_at_once() {
        let (dir, config) = folder();
        let path = dir.path().join(PAIRING_FILE);
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &path,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::RUSR | rustix::fs::Mode::WUSR,
            0,
        )
        .unwrap();
        let error = config.load_pairing().unwrap_err();
        assert!(
            matches!(&error, ConfigError::Corrupt { why, .. } if why == "not a regular file"),
            "{error}"
        );
        fs::remove_file(&path).unwrap();
        fs::create_dir(&path).unwrap();
        assert!(matches!(
            config.load_pairing(),
            Err(ConfigError::Corrupt { .. })
        ));
    }

    #[test]
    fn a_folder_others_may_write_is_tightened() {
        let (dir, config) = folder();
        config.save_pairing(&code()).unwrap();
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o777)).unwrap();
        config.load_pairing().unwrap();
        let mode = fs::metadata(dir.path()).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
    }

    #[test]
    fn a_folder_of_another_user_is_refused() {
        if !rustix::process::geteuid().is_root() {
            // Only root can give a folder away; CI runs as root.
            eprintln!("skipped: needs root to give the folder to another user");
            return;
        }
        let (dir, config) = folder();
        config.save_pairing(&code()).unwrap();
        let nobody = rustix::fs::Uid::from_raw(65534);
        rustix::fs::chown(dir.path(), Some(nobody), None).unwrap();
        assert!(matches!(
            config.load_pairing(),
            Err(ConfigError::ForeignFolder { .. })
        ));
        assert!(matches!(
            config.save_pairing(&code()),
            Err(ConfigError::ForeignFolder { .. })
        ));
    }
}
