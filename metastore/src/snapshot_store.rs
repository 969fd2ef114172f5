//! Snapshots on disk: each snapshot's data in a file of its own, and a small `current` file that
//! names the stored snapshot and holds its meta.
//!
//! Data is written and read as a stream: a snapshot of millions of keys never sits in memory as
//! one buffer (it did before, once per node, on every snapshot), and the data file is what a
//! leader streams to a follower and what a follower receives into.

use std::fs::{self, File};
use std::io::{self, BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::task::{Context, Poll};

use openraft::SnapshotMeta;
use parking_lot::Mutex;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncSeek, AsyncWrite, ReadBuf};

use crate::codec;
use crate::node_id::{Node, NodeId};

/// The file naming the stored snapshot; replaced atomically, so it is the commit point.
const CURRENT: &str = "current";
/// The single file (meta, then data) that builds before this layout wrote.
const LEGACY: &str = "snapshot.bin";
/// Data files end in this.
const DATA_EXT: &str = "snap";
/// Files being written end in this until they are complete.
const TMP_EXT: &str = "tmp";
/// Buffer for streaming a snapshot to or from its file.
const IO_BUFFER: usize = 1 << 20;
/// A snapshot being built is synced every this many bytes.
const SYNC_EVERY: u64 = 4 << 20;

/// A file writer that syncs every [`SYNC_EVERY`] bytes. The Raft log's fsync also writes out the
/// other dirty data of the file system (ext4's ordered journal), so a snapshot of hundreds of MB
/// synced only at its end made the log's next fsync wait for all of it: appends timed out and
/// client writes stalled for up to a second after each snapshot.
struct PacedSync {
    file: File,
    unsynced: u64,
}

impl Write for PacedSync {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.file.write(buf)?;
        self.unsynced += n as u64;
        if self.unsynced >= SYNC_EVERY {
            self.file.sync_data()?;
            self.unsynced = 0;
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

/// Snapshot meta as openraft knows it.
pub type Meta = SnapshotMeta<NodeId, Node>;

/// A snapshot's data file: openraft reads it to send a snapshot and writes into it to receive one.
#[derive(Debug)]
pub struct SnapshotFile {
    file: tokio::fs::File,
    path: PathBuf,
    /// A file being received: removed if dropped before it is installed (openraft drops a
    /// stream that a newer one replaces, or whose snapshot is no longer needed).
    unfinished: bool,
}

impl SnapshotFile {
    fn stored(file: tokio::fs::File, path: PathBuf) -> Self {
        Self {
            file,
            path,
            unfinished: false,
        }
    }
}

impl Drop for SnapshotFile {
    fn drop(&mut self) {
        if self.unfinished {
            if let Err(e) = fs::remove_file(&self.path) {
                tracing::warn!(path = %self.path.display(), "cannot remove an unfinished snapshot: {e}");
            }
        }
    }
}

impl AsyncRead for SnapshotFile {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().file).poll_read(cx, buf)
    }
}

impl AsyncWrite for SnapshotFile {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().file).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().file).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().file).poll_shutdown(cx)
    }
}

impl AsyncSeek for SnapshotFile {
    fn start_seek(self: Pin<&mut Self>, position: SeekFrom) -> io::Result<()> {
        Pin::new(&mut self.get_mut().file).start_seek(position)
    }

    fn poll_complete(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<u64>> {
        Pin::new(&mut self.get_mut().file).poll_complete(cx)
    }
}

/// What the `current` file holds.
#[derive(Serialize, Deserialize, Clone)]
struct Current {
    meta: Meta,
    data_file: String,
}

/// The snapshot directory of one node.
pub struct SnapshotStore {
    dir: PathBuf,
    /// The stored snapshot; held only to read or swap it.
    current: Mutex<Option<Current>>,
    /// Held through a whole commit, so that a build finishing late cannot replace a newer
    /// snapshot (installed meanwhile) with an older one.
    committing: Mutex<()>,
}

impl SnapshotStore {
    /// Opens `dir`, converting the single-file snapshot of an older build and removing files
    /// that no snapshot names (a build or a receive cut short).
    pub fn open(dir: &Path) -> io::Result<Self> {
        fs::create_dir_all(dir)?;
        let mut current = read_current(dir)?;
        let legacy = dir.join(LEGACY);
        if legacy.exists() {
            if current.is_none() {
                current = Some(convert_legacy(dir, &legacy)?);
            }
            fs::remove_file(&legacy)?;
        }
        for entry in fs::read_dir(dir)? {
            let name = entry?.file_name().to_string_lossy().into_owned();
            let ours = name.ends_with(DATA_EXT) || name.ends_with(TMP_EXT);
            if ours && current.as_ref().is_none_or(|c| c.data_file != name) {
                let path = dir.join(&name);
                fs::remove_file(&path).map_err(at(&path))?;
            }
        }
        Ok(Self {
            dir: dir.to_path_buf(),
            current: Mutex::new(current),
            committing: Mutex::new(()),
        })
    }

    /// The stored snapshot's meta.
    pub fn meta(&self) -> Option<Meta> {
        self.current.lock().as_ref().map(|c| c.meta.clone())
    }

    /// Reads the stored snapshot's body (blocking).
    pub fn load<T: DeserializeOwned>(&self) -> io::Result<Option<T>> {
        let name = self.current.lock().as_ref().map(|c| c.data_file.clone());
        name.map(|n| {
            let path = self.dir.join(n);
            decode_file(File::open(&path).map_err(at(&path))?, &path)
        })
        .transpose()
    }

    /// Writes a snapshot built on this node and makes it the stored one, unless a newer one was
    /// stored meanwhile (blocking). Returns its data, opened for reading.
    pub fn write_built<T: Serialize>(&self, meta: &Meta, body: &T) -> io::Result<SnapshotFile> {
        let tmp = new_tmp_path(&self.dir);
        let file = PacedSync {
            file: File::create(&tmp).map_err(at(&tmp))?,
            unsynced: 0,
        };
        let mut out = BufWriter::with_capacity(IO_BUFFER, file);
        codec::encode_to(body, &mut out).map_err(at(&tmp))?;
        out.into_inner()
            .map_err(|e| e.into_error())
            .and_then(|f| f.file.sync_all())
            .map_err(at(&tmp))?;
        let (name, path) = complete(&tmp)?;
        // Opened before the commit, which removes the file if a newer snapshot won; openraft
        // ignores a build older than its snapshot.
        let file = File::open(&path).map_err(at(&path))?;
        self.commit(meta, name)?;
        Ok(SnapshotFile::stored(tokio::fs::File::from_std(file), path))
    }

    /// A new, empty file to receive a snapshot from the leader into.
    pub async fn receiving(&self) -> io::Result<SnapshotFile> {
        let path = new_tmp_path(&self.dir);
        let file = tokio::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
            .await
            .map_err(at(&path))?;
        Ok(SnapshotFile {
            file,
            path,
            unfinished: true,
        })
    }

    /// Reads a received snapshot and makes it the stored one; `None` if a newer snapshot is
    /// stored already. A snapshot that does not decode is removed and changes nothing.
    pub async fn install_received<T: DeserializeOwned + Send + 'static>(
        self: &std::sync::Arc<Self>,
        meta: &Meta,
        mut received: SnapshotFile,
    ) -> io::Result<Option<T>> {
        // Waits for writes still in flight in tokio's file; the dup'd descriptor outlives the
        // `SnapshotFile`, which removes the file if anything below fails.
        let file = received
            .file
            .try_clone()
            .await
            .map_err(at(&received.path))?
            .into_std()
            .await;
        // openraft hands over what `receiving` opened; anything else (a snapshot built by another
        // store, as openraft's storage suite installs) is copied in, never moved or removed.
        let ours = received.unfinished && received.path.parent() == Some(self.dir.as_path());
        let this = self.clone();
        let meta = meta.clone();
        let path = received.path.clone();
        let installed = tokio::task::spawn_blocking(move || {
            let (file, tmp) = if ours {
                (file, path)
            } else {
                copy_in(&this.dir, file, &path)?
            };
            let read = file.sync_all().map_err(at(&tmp)).and_then(|()| decode_file(file, &tmp));
            let body = match read {
                Ok(body) => body,
                Err(e) => {
                    if !ours {
                        let _ = fs::remove_file(&tmp);
                    }
                    return Err(e);
                }
            };
            let (name, _) = complete(&tmp)?;
            Ok(this.commit(&meta, name)?.then_some(body))
        })
        .await
        .map_err(|e| io::Error::other(e.to_string()))?;
        if ours {
            // Renamed: nothing for the drop to remove; failed before that: removed by the drop.
            received.unfinished = received.path.exists();
        }
        installed
    }

    /// The stored snapshot, opened for reading.
    pub async fn current(&self) -> io::Result<Option<(Meta, SnapshotFile)>> {
        loop {
            let Some(c) = self.current.lock().clone() else {
                return Ok(None);
            };
            let path = self.dir.join(&c.data_file);
            match tokio::fs::File::open(&path).await {
                Ok(file) => return Ok(Some((c.meta, SnapshotFile::stored(file, path)))),
                // A newer snapshot was committed, and this one removed, in between: take that.
                Err(e)
                    if e.kind() == io::ErrorKind::NotFound
                        && self.current.lock().as_ref().is_some_and(|n| n.data_file != c.data_file) => {}
                Err(e) => return Err(at(&path)(e)),
            }
        }
    }

    /// Makes the data file `data_file` (complete and synced) the stored snapshot and removes
    /// the one it replaces; `false`, and the file removed, if the stored one is newer.
    fn commit(&self, meta: &Meta, data_file: String) -> io::Result<bool> {
        let _committing = self.committing.lock();
        let newer_stored = self
            .current
            .lock()
            .as_ref()
            .is_some_and(|c| c.meta.last_log_id > meta.last_log_id);
        if newer_stored {
            remove_replaced(&self.dir.join(&data_file));
            return Ok(false);
        }
        let new = Current {
            meta: meta.clone(),
            data_file,
        };
        write_current(&self.dir, &new)?;
        let old = self.current.lock().replace(new.clone());
        if let Some(old) = old.filter(|o| o.data_file != new.data_file) {
            remove_replaced(&self.dir.join(&old.data_file));
        }
        Ok(true)
    }
}

/// Removes a data file no snapshot names any more. A failure leaves it for the next open to
/// remove: the commit has happened.
fn remove_replaced(path: &Path) {
    if let Err(e) = fs::remove_file(path) {
        tracing::warn!(path = %path.display(), "cannot remove a replaced snapshot: {e}");
    }
}

/// Adds the file's path to an I/O error.
fn at(path: &Path) -> impl Fn(io::Error) -> io::Error + '_ {
    move |e| io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

/// A new data file's name while it is written: `<id>.snap.tmp`.
fn new_tmp_path(dir: &Path) -> PathBuf {
    dir.join(format!("{}.{DATA_EXT}.{TMP_EXT}", uuid::Uuid::new_v4().simple()))
}

/// Copies a snapshot's data from a file elsewhere into a new temp file here.
fn copy_in(dir: &Path, mut from: File, from_path: &Path) -> io::Result<(File, PathBuf)> {
    from.seek(SeekFrom::Start(0)).map_err(at(from_path))?;
    let tmp = new_tmp_path(dir);
    let mut out = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&tmp)
        .map_err(at(&tmp))?;
    if let Err(e) = io::copy(&mut from, &mut out) {
        let _ = fs::remove_file(&tmp);
        return Err(at(&tmp)(e));
    }
    Ok((out, tmp))
}

/// Renames a data file, written and synced, from its temp name to its own; returns both.
fn complete(tmp: &Path) -> io::Result<(String, PathBuf)> {
    let name = tmp
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .ok_or_else(|| io::Error::other(format!("{}: no file name", tmp.display())))?;
    let path = tmp.with_file_name(&name);
    fs::rename(tmp, &path).map_err(at(&path))?;
    Ok((name, path))
}

fn invalid(path: &Path, what: &str, e: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("{}: {what}: {e}", path.display()))
}

fn decode_file<T: DeserializeOwned>(mut file: File, path: &Path) -> io::Result<T> {
    let size = file.seek(SeekFrom::End(0)).map_err(at(path))?;
    file.seek(SeekFrom::Start(0)).map_err(at(path))?;
    codec::decode_stored_from(&mut BufReader::with_capacity(IO_BUFFER, file), size)
        .map_err(|e| invalid(path, "snapshot data does not decode", e))
}

fn read_current(dir: &Path) -> io::Result<Option<Current>> {
    let path = dir.join(CURRENT);
    let current: Current = match fs::read(&path) {
        Ok(bytes) => codec::decode(&bytes).map_err(|e| invalid(&path, "does not decode", e))?,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(at(&path)(e)),
    };
    // Only ever a name this store made: never a path that leads out of the folder.
    let plain = Path::new(&current.data_file).file_name() == Some(std::ffi::OsStr::new(&current.data_file));
    if !plain || !current.data_file.ends_with(DATA_EXT) {
        return Err(invalid(&path, "names no snapshot data file", &current.data_file));
    }
    Ok(Some(current))
}

/// Replaces the `current` file: a synced temp file renamed over it, then the folder synced, which
/// also makes the data file's own rename durable.
fn write_current(dir: &Path, current: &Current) -> io::Result<()> {
    let tmp = dir.join(format!("{CURRENT}.{TMP_EXT}"));
    let mut f = File::create(&tmp).map_err(at(&tmp))?;
    f.write_all(&codec::encode(current))
        .and_then(|()| f.sync_all())
        .map_err(at(&tmp))?;
    fs::rename(&tmp, dir.join(CURRENT)).map_err(at(&tmp))?;
    File::open(dir).and_then(|d| d.sync_all()).map_err(at(dir))
}

/// Moves an older build's snapshot (meta length as u64 LE, meta, data) to this layout.
fn convert_legacy(dir: &Path, legacy: &Path) -> io::Result<Current> {
    let mut f = File::open(legacy).map_err(at(legacy))?;
    let mut len = [0u8; 8];
    f.read_exact(&mut len).map_err(at(legacy))?;
    // The meta is a log id and a membership: far below this.
    let meta_len = u64::from_le_bytes(len);
    if meta_len > 1 << 24 {
        return Err(invalid(legacy, "damaged", format!("meta of {meta_len} bytes")));
    }
    let mut meta = vec![0u8; meta_len as usize];
    f.read_exact(&mut meta).map_err(at(legacy))?;
    let meta: Meta = codec::decode_stored(&meta).map_err(|e| invalid(legacy, "meta does not decode", e))?;
    let tmp = new_tmp_path(dir);
    let mut out = File::create(&tmp).map_err(at(&tmp))?;
    io::copy(&mut f, &mut out)
        .and_then(|_| out.sync_all())
        .map_err(at(&tmp))?;
    let (data_file, _) = complete(&tmp)?;
    let current = Current { meta, data_file };
    write_current(dir, &current)?;
    Ok(current)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use openraft::{CommittedLeaderId, LogId, StoredMembership};
    use tokio::io::AsyncWriteExt;

    use super::*;

    fn meta(index: u64) -> Meta {
        SnapshotMeta {
            last_log_id: Some(LogId::new(CommittedLeaderId::new(1, 1), index)),
            last_membership: StoredMembership::default(),
            snapshot_id: format!("s{index}"),
        }
    }

    /// A receive of `bytes`, as openraft writes the chunks.
    async fn received(store: &SnapshotStore, bytes: &[u8]) -> SnapshotFile {
        let mut rx = store.receiving().await.expect("receiving");
        rx.write_all(bytes).await.expect("write");
        rx
    }

    fn files(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir)
            .expect("read dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn a_built_snapshot_reads_back_after_reopen_and_replaced_data_is_removed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = SnapshotStore::open(dir.path()).expect("open");
        store.write_built(&meta(5), &"five".to_string()).expect("build");
        store.write_built(&meta(9), &"nine".to_string()).expect("build");
        drop(store);
        let store = SnapshotStore::open(dir.path()).expect("reopen");
        assert_eq!(store.meta().and_then(|m| m.last_log_id).map(|l| l.index), Some(9));
        assert_eq!(store.load::<String>().expect("load").as_deref(), Some("nine"));
        assert_eq!(
            files(dir.path()).len(),
            2,
            "current and one data file: {:?}",
            files(dir.path())
        );
    }

    #[test]
    fn a_build_that_finishes_after_a_newer_snapshot_does_not_replace_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = SnapshotStore::open(dir.path()).expect("open");
        store.write_built(&meta(9), &"nine".to_string()).expect("build");
        store.write_built(&meta(5), &"five".to_string()).expect("late build");
        assert_eq!(store.load::<String>().expect("load").as_deref(), Some("nine"));
        assert_eq!(files(dir.path()).len(), 2, "{:?}", files(dir.path()));
    }

    #[test]
    fn files_left_by_a_build_cut_short_are_removed_on_open() {
        let dir = tempfile::tempdir().expect("tempdir");
        SnapshotStore::open(dir.path())
            .expect("open")
            .write_built(&meta(3), &"three".to_string())
            .expect("build");
        fs::write(dir.path().join("abc.snap.tmp"), b"half").expect("write");
        fs::write(dir.path().join("def.snap"), b"orphan").expect("write");
        let store = SnapshotStore::open(dir.path()).expect("reopen");
        assert_eq!(store.load::<String>().expect("load").as_deref(), Some("three"));
        assert_eq!(files(dir.path()).len(), 2, "{:?}", files(dir.path()));
    }

    #[test]
    fn an_older_builds_single_file_snapshot_is_converted_on_open() {
        let dir = tempfile::tempdir().expect("tempdir");
        let meta_bytes = codec::encode(&meta(7));
        let mut old = (meta_bytes.len() as u64).to_le_bytes().to_vec();
        old.extend_from_slice(&meta_bytes);
        old.extend_from_slice(&codec::encode(&"seven".to_string()));
        fs::write(dir.path().join(LEGACY), old).expect("write");
        let store = SnapshotStore::open(dir.path()).expect("open");
        assert_eq!(store.meta().and_then(|m| m.last_log_id).map(|l| l.index), Some(7));
        assert_eq!(store.load::<String>().expect("load").as_deref(), Some("seven"));
        assert!(!dir.path().join(LEGACY).exists());
    }

    #[tokio::test]
    async fn a_received_snapshot_is_stored_and_a_damaged_one_changes_nothing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Arc::new(SnapshotStore::open(dir.path()).expect("open"));
        let rx = received(&store, &codec::encode(&"received".to_string())).await;
        let body: Option<String> = store.install_received(&meta(4), rx).await.expect("install");
        assert_eq!(body.as_deref(), Some("received"));

        let mut bad = codec::encode(&"x".repeat(100));
        bad.truncate(20);
        let rx = received(&store, &bad).await;
        let err = store
            .install_received::<String>(&meta(8), rx)
            .await
            .expect_err("damaged");
        assert!(err.to_string().contains("does not decode"), "{err}");
        assert_eq!(store.meta().and_then(|m| m.last_log_id).map(|l| l.index), Some(4));
        assert_eq!(store.load::<String>().expect("load").as_deref(), Some("received"));
        assert_eq!(files(dir.path()).len(), 2, "{:?}", files(dir.path()));

        let (m, mut file) = store.current().await.expect("current").expect("stored");
        assert_eq!(m.last_log_id.map(|l| l.index), Some(4));
        let mut data = Vec::new();
        tokio::io::AsyncReadExt::read_to_end(&mut file, &mut data)
            .await
            .expect("read");
        assert_eq!(data, codec::encode(&"received".to_string()));

        // Older than the stored one: not installed, and its file gone.
        let rx = received(&store, &codec::encode(&"old".to_string())).await;
        let old: Option<String> = store.install_received(&meta(2), rx).await.expect("install");
        assert_eq!(old, None);
        assert_eq!(store.load::<String>().expect("load").as_deref(), Some("received"));
        assert_eq!(files(dir.path()).len(), 2, "{:?}", files(dir.path()));
    }

    #[tokio::test]
    async fn a_receive_that_is_abandoned_leaves_no_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = SnapshotStore::open(dir.path()).expect("open");
        let mut rx = received(&store, b"part of a snapshot").await;
        rx.flush().await.expect("flush");
        assert_eq!(files(dir.path()).len(), 1);
        drop(rx);
        assert!(files(dir.path()).is_empty(), "{:?}", files(dir.path()));
    }

    #[test]
    fn a_current_file_naming_a_path_outside_the_folder_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let bad = Current {
            meta: meta(1),
            data_file: "../elsewhere.snap".into(),
        };
        fs::write(dir.path().join(CURRENT), codec::encode(&bad)).expect("write");
        let err = SnapshotStore::open(dir.path()).err().expect("refused");
        assert!(err.to_string().contains("names no snapshot data file"), "{err}");
    }
}
