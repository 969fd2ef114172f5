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
use crate::types::{Node, NodeId};

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

/// Snapshot meta as openraft knows it.
pub type Meta = SnapshotMeta<NodeId, Node>;

/// A snapshot's data file: openraft reads it to send a snapshot and writes into it to receive one.
#[derive(Debug)]
pub struct SnapshotFile {
    file: tokio::fs::File,
    path: PathBuf,
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
    /// The stored snapshot. Held while one is committed, so that a build finishing late cannot
    /// replace a newer snapshot (installed meanwhile) with an older one.
    current: Mutex<Option<Current>>,
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
                fs::remove_file(dir.join(&name))?;
            }
        }
        Ok(Self {
            dir: dir.to_path_buf(),
            current: Mutex::new(current),
        })
    }

    /// The stored snapshot's meta.
    pub fn meta(&self) -> Option<Meta> {
        self.current.lock().as_ref().map(|c| c.meta.clone())
    }

    /// Reads the stored snapshot's body (blocking).
    pub fn load<T: DeserializeOwned>(&self) -> io::Result<Option<T>> {
        let name = self.current.lock().as_ref().map(|c| c.data_file.clone());
        name.map(|n| decode_file(File::open(self.dir.join(n))?, &self.dir))
            .transpose()
    }

    /// Writes a snapshot built on this node and makes it the stored one, unless a newer one was
    /// stored meanwhile (blocking). Returns its data, opened for reading.
    pub fn write_built<T: Serialize>(&self, meta: &Meta, body: &T) -> io::Result<SnapshotFile> {
        let name = new_data_name();
        let tmp = self.dir.join(format!("{name}.{TMP_EXT}"));
        let mut out = BufWriter::with_capacity(IO_BUFFER, File::create(&tmp)?);
        codec::encode_to(body, &mut out)?;
        out.into_inner().map_err(|e| e.into_error())?.sync_all()?;
        let path = self.dir.join(&name);
        fs::rename(&tmp, &path)?;
        // Opened before the commit, which removes the file if a newer snapshot won.
        let file = File::open(&path)?;
        self.commit(meta, name)?;
        Ok(SnapshotFile {
            file: tokio::fs::File::from_std(file),
            path,
        })
    }

    /// A new, empty file to receive a snapshot from the leader into.
    pub async fn receiving(&self) -> io::Result<SnapshotFile> {
        let path = self.dir.join(format!("{}.{TMP_EXT}", new_data_name()));
        let file = tokio::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
            .await?;
        Ok(SnapshotFile { file, path })
    }

    /// Reads a received snapshot and makes it the stored one. A snapshot that does not decode is
    /// removed and changes nothing.
    pub async fn install_received<T: DeserializeOwned + Send + 'static>(
        self: &std::sync::Arc<Self>,
        meta: &Meta,
        received: SnapshotFile,
    ) -> io::Result<T> {
        // Waits for writes still in flight in tokio's file.
        let file = received.file.into_std().await;
        let this = self.clone();
        let meta = meta.clone();
        let tmp = received.path;
        tokio::task::spawn_blocking(move || {
            let read = file.sync_all().and_then(|()| decode_file(file, &this.dir));
            let body = match read {
                Ok(body) => body,
                Err(e) => {
                    let _ = fs::remove_file(&tmp);
                    return Err(e);
                }
            };
            let name = tmp
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .ok_or_else(|| io::Error::other("received snapshot file has no name"))?;
            fs::rename(&tmp, this.dir.join(&name))?;
            this.commit(&meta, name)?;
            Ok(body)
        })
        .await
        .map_err(|e| io::Error::other(e.to_string()))?
    }

    /// The stored snapshot, opened for reading.
    pub async fn current(&self) -> io::Result<Option<(Meta, SnapshotFile)>> {
        loop {
            let Some(c) = self.current.lock().clone() else {
                return Ok(None);
            };
            let path = self.dir.join(&c.data_file);
            match tokio::fs::File::open(&path).await {
                Ok(file) => return Ok(Some((c.meta, SnapshotFile { file, path }))),
                // A newer snapshot was committed, and this one removed, in between: take that.
                Err(e)
                    if e.kind() == io::ErrorKind::NotFound
                        && self.current.lock().as_ref().is_some_and(|n| n.data_file != c.data_file) => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Makes the data file `data_file` (complete and synced) the stored snapshot, unless the
    /// stored one is newer; then removes the data file that is no longer stored.
    fn commit(&self, meta: &Meta, data_file: String) -> io::Result<()> {
        let mut current = self.current.lock();
        if current.as_ref().is_some_and(|c| c.meta.last_log_id > meta.last_log_id) {
            return fs::remove_file(self.dir.join(&data_file));
        }
        let new = Current {
            meta: meta.clone(),
            data_file,
        };
        write_current(&self.dir, &new)?;
        if let Some(old) = current.replace(new) {
            if current.as_ref().is_some_and(|c| c.data_file != old.data_file) {
                fs::remove_file(self.dir.join(&old.data_file))?;
            }
        }
        Ok(())
    }
}

fn new_data_name() -> String {
    format!("{}.{DATA_EXT}", uuid::Uuid::new_v4().simple())
}

fn invalid(dir: &Path, what: &str, e: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("{what} in {}: {e}", dir.display()))
}

fn decode_file<T: DeserializeOwned>(mut file: File, dir: &Path) -> io::Result<T> {
    file.seek(SeekFrom::Start(0))?;
    codec::decode_stored_from(&mut BufReader::with_capacity(IO_BUFFER, file))
        .map_err(|e| invalid(dir, "snapshot data does not decode", e))
}

fn read_current(dir: &Path) -> io::Result<Option<Current>> {
    match fs::read(dir.join(CURRENT)) {
        Ok(bytes) => codec::decode(&bytes)
            .map(Some)
            .map_err(|e| invalid(dir, "the current snapshot file does not decode", e)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Replaces the `current` file: a synced temp file renamed over it, then the folder synced, which
/// also makes the data file's own rename durable.
fn write_current(dir: &Path, current: &Current) -> io::Result<()> {
    let tmp = dir.join(format!("{CURRENT}.{TMP_EXT}"));
    let mut f = File::create(&tmp)?;
    f.write_all(&codec::encode(current))?;
    f.sync_all()?;
    fs::rename(&tmp, dir.join(CURRENT))?;
    File::open(dir)?.sync_all()
}

/// Moves an older build's snapshot (meta length as u64 LE, meta, data) to this layout.
fn convert_legacy(dir: &Path, legacy: &Path) -> io::Result<Current> {
    let mut f = File::open(legacy)?;
    let mut len = [0u8; 8];
    f.read_exact(&mut len)?;
    // The meta is a log id and a membership: far below this.
    let meta_len = u64::from_le_bytes(len);
    if meta_len > 1 << 24 {
        return Err(invalid(
            dir,
            "the old snapshot file is damaged",
            format!("meta of {meta_len} bytes"),
        ));
    }
    let mut meta = vec![0u8; meta_len as usize];
    f.read_exact(&mut meta)?;
    let meta: Meta =
        codec::decode_stored(&meta).map_err(|e| invalid(dir, "the old snapshot's meta does not decode", e))?;
    let name = new_data_name();
    let tmp = dir.join(format!("{name}.{TMP_EXT}"));
    let mut out = File::create(&tmp)?;
    io::copy(&mut f, &mut out)?;
    out.sync_all()?;
    fs::rename(&tmp, dir.join(&name))?;
    let current = Current { meta, data_file: name };
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
        let mut rx = store.receiving().await.expect("receiving");
        rx.write_all(&codec::encode(&"received".to_string()))
            .await
            .expect("write");
        let body: String = store.install_received(&meta(4), rx).await.expect("install");
        assert_eq!(body, "received");

        let mut rx = store.receiving().await.expect("receiving");
        let mut bad = codec::encode(&"x".repeat(100));
        bad.truncate(20);
        rx.write_all(&bad).await.expect("write");
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
    }
}
