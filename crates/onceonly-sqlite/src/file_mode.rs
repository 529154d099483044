//! The database file readable by its owner only.
//!
//! SQLite creates a database file 0644 less the umask, so under the usual
//! umask (022) any local user could read every payload. The store creates
//! the file itself, mode 0600, before SQLite opens it; SQLite then gives the
//! `-wal` and `-shm` files it creates the database file's mode, whatever
//! the umask (`robust_open` in its unix VFS, tested in
//! `tests/file_mode.rs`). A file that exists already keeps its mode: the
//! operator may have chosen it.

use std::path::Path;

/// Creates an empty `path` with mode 0600 unless it exists.
pub(crate) fn create_private(path: &Path) -> std::io::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
        options.mode(0o600);
        match options.open(path) {
            // The umask may have taken more than 0600 leaves: set it whole.
            Ok(file) => file.set_permissions(std::fs::Permissions::from_mode(0o600)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
            Err(e) => Err(e),
        }
    }
    #[cfg(not(unix))]
    match options.open(path) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e),
    }
}
