//! Whether a store file that ends before LMDB's last page is whole.
//!
//! LMDB's meta page names the last page a commit used (`mm_last_pg`), and
//! "the file may be shorter if the freeDB lists the final pages" (its own
//! words): a page a transaction allocated at the end of the file and freed
//! before it committed (a *loose* page) goes to the free list unwritten.
//! Such a store is sound; one cut short (a copy that stopped, a disk that
//! lost its end) lacks pages its trees reach, and reading one through the
//! map would kill the process with SIGBUS.
//!
//! So when the file ends early, the free list is read from the file with
//! `pread` (never through the map): the file is whole when every page past
//! its end is free. Only the free list's tree is read, and only then.
//!
//! The layout read here is LMDB's on 64-bit little-endian machines (page
//! numbers, transaction ids and sizes of 8 bytes), from `mdb.c`: a page's
//! header (`MDB_page`, 16 bytes: its number, a pad, its flags, the bounds of
//! its free space, or an overflow run's page count) and its node offsets;
//! a node's header (`MDB_node`, 8 bytes: the data size or child page
//! number's low and high words, flags holding a child page number's top
//! word, the key's size), its key and its data; a meta page's `MDB_meta`
//! after the header, whose first `MDB_db` is the free list's tree. Each
//! free list entry's data is an ID list: its length, then page numbers.

use std::collections::HashSet;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

const _: () = assert!(
    cfg!(target_pointer_width = "64") && cfg!(target_endian = "little"),
    "the page layout read here is LMDB's on 64-bit little-endian machines"
);

/// `PAGEHDRSZ`.
const PAGE_HEADER_BYTES: usize = 16;
/// `NODESIZE`.
const NODE_HEADER_BYTES: usize = 8;
const P_BRANCH: u16 = 0x01;
const P_LEAF: u16 = 0x02;
const F_BIGDATA: u16 = 0x01;
/// `P_INVALID`: an empty tree's root.
const NO_PAGE: u64 = u64::MAX;
/// Where the free list's `MDB_db` starts in a meta page (after the
/// header, `mm_magic`, `mm_version`, `mm_address` and `mm_mapsize`), and
/// its `md_root` within it.
const FREE_DB_AT: usize = PAGE_HEADER_BYTES + 24;
const DB_ROOT_AT: usize = 40;
/// `mm_txnid` in a meta page: after the two `MDB_db`s and `mm_last_pg`.
const META_TXNID_AT: usize = FREE_DB_AT + 2 * 48 + 8;

/// Whether every page from `file_pages` to `last_page` (LMDB's last page)
/// is on the free list of the store file `file`, whose pages are
/// `page_bytes` long; `false` too when the free list's own pages are not
/// all in the file or do not read as LMDB's.
pub(super) fn missing_pages_are_free(
    file: &File,
    page_bytes: usize,
    file_pages: u64,
    last_page: u64,
) -> io::Result<bool> {
    let pages = Pages {
        file,
        page_bytes,
        file_pages,
    };
    let Some(free) = pages.free_past(file_pages)? else {
        return Ok(false);
    };
    Ok((file_pages..=last_page).all(|page| free.contains(&page)))
}

/// The pages of a store file that are in it.
struct Pages<'a> {
    file: &'a File,
    page_bytes: usize,
    file_pages: u64,
}

impl Pages<'_> {
    /// Page `number` (with the `count - 1` after it), if all are in the file.
    fn read(&self, number: u64, count: u64) -> io::Result<Option<Vec<u8>>> {
        if number.saturating_add(count) > self.file_pages {
            return Ok(None);
        }
        let mut bytes = vec![0; self.page_bytes * count as usize];
        self.file
            .read_exact_at(&mut bytes, number * self.page_bytes as u64)?;
        Ok(Some(bytes))
    }

    /// The meta page of the last commit (the one of the two with the
    /// higher transaction id), if both are in the file.
    fn newer_meta(&self) -> io::Result<Option<Vec<u8>>> {
        let (Some(meta_0), Some(meta_1)) = (self.read(0, 1)?, self.read(1, 1)?) else {
            return Ok(None);
        };
        let txnid = |meta: &[u8]| u64_at(meta, META_TXNID_AT);
        Ok(Some(if txnid(&meta_0) < txnid(&meta_1) {
            meta_1
        } else {
            meta_0
        }))
    }

    /// The free pages from page `from` on, as the newer meta page's free
    /// list names them; `None` if its tree does not read.
    fn free_past(&self, from: u64) -> io::Result<Option<HashSet<u64>>> {
        let Some(meta) = self.newer_meta()? else {
            return Ok(None);
        };
        let mut free = HashSet::new();
        let mut unread = vec![u64_at(&meta, FREE_DB_AT + DB_ROOT_AT)];
        // A tree has fewer pages than the file: more is a loop.
        let mut budget = self.file_pages;
        while let Some(number) = unread.pop() {
            if number == NO_PAGE {
                continue;
            }
            budget = budget.saturating_sub(1);
            let Some(page) = self.read(number, 1)?.filter(|_| budget > 0) else {
                return Ok(None);
            };
            let read = match u16_at(&page, 10) & (P_BRANCH | P_LEAF) {
                P_BRANCH => nodes(&page).map(|nodes| {
                    let child = |node: usize| {
                        let low = u64::from(u16_at(&page, node))
                            | u64::from(u16_at(&page, node + 2)) << 16;
                        low | u64::from(u16_at(&page, node + 4)) << 32
                    };
                    unread.extend(nodes.map(child));
                }),
                P_LEAF => match nodes(&page) {
                    Some(nodes) => self.take_leaf(&page, nodes, from, &mut free)?,
                    None => None,
                },
                _ => None,
            };
            if read.is_none() {
                return Ok(None);
            }
        }
        Ok(Some(free))
    }

    /// Takes the page numbers from `from` on of a free list leaf's entries
    /// (at `nodes`) into `free`; `None` if one does not read.
    fn take_leaf(
        &self,
        page: &[u8],
        nodes: impl Iterator<Item = usize>,
        from: u64,
        free: &mut HashSet<u64>,
    ) -> io::Result<Option<()>> {
        for node in nodes {
            let data_bytes =
                u32::from(u16_at(page, node)) | u32::from(u16_at(page, node + 2)) << 16;
            let key_bytes = usize::from(u16_at(page, node + 6));
            let data_at = node + NODE_HEADER_BYTES + key_bytes;
            let overflow;
            let data = if u16_at(page, node + 4) & F_BIGDATA != 0 {
                let Some(first) = page.get(data_at..data_at + 8).map(|b| u64_at(b, 0)) else {
                    return Ok(None);
                };
                let count = (PAGE_HEADER_BYTES + data_bytes as usize).div_ceil(self.page_bytes);
                let Some(run) = self.read(first, count as u64)? else {
                    return Ok(None);
                };
                overflow = run;
                overflow.get(PAGE_HEADER_BYTES..PAGE_HEADER_BYTES + data_bytes as usize)
            } else {
                page.get(data_at..data_at + data_bytes as usize)
            };
            let Some(list) = data.filter(|d| d.len() >= 8 && d.len() % 8 == 0) else {
                return Ok(None);
            };
            let numbers = list.chunks_exact(8).map(|n| u64_at(n, 0));
            let length = u64_at(list, 0) as usize;
            if length + 1 > list.len() / 8 {
                return Ok(None);
            }
            free.extend(numbers.skip(1).take(length).filter(|&n| n >= from));
        }
        Ok(Some(()))
    }
}

/// The offsets of a branch or leaf page's nodes, if its header's bounds
/// hold them.
fn nodes(page: &[u8]) -> Option<impl Iterator<Item = usize> + '_> {
    let lower = usize::from(u16_at(page, 12));
    let count = lower.checked_sub(PAGE_HEADER_BYTES)? / 2;
    let fits = |at: usize| at + NODE_HEADER_BYTES <= page.len();
    let offsets = (0..count).map(move |i| usize::from(u16_at(page, PAGE_HEADER_BYTES + 2 * i)));
    (lower <= page.len() && offsets.clone().all(fits)).then_some(offsets)
}

fn u16_at(bytes: &[u8], at: usize) -> u16 {
    u16::from_le_bytes(bytes[at..at + 2].try_into().expect("2 bytes"))
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use heed::types::Bytes;
    use heed::{CommitOrAbort, EnvOpenOptions};
    use std::fs::OpenOptions;

    /// An environment in `dir` (opened once) with one database, `rows`.
    fn rows_env(dir: &std::path::Path) -> (heed::Env, heed::Database<'static, Bytes, Bytes>) {
        // SAFETY: each test opens its environment once.
        let env = unsafe {
            let mut options = EnvOpenOptions::new();
            options.map_size(64 << 20).max_dbs(1).open(dir).unwrap()
        };
        let db = env
            .create_databases_and_commit(env.write_txn().unwrap(), |opener, wtxn| {
                let db = opener.create_database::<Bytes, Bytes>(wtxn, Some("rows"))?;
                Ok::<_, heed::Error>(CommitOrAbort::<_, ()>::Commit(db))
            })
            .unwrap()
            .unwrap_commit();
        (env, db)
    }

    /// A store whose last transaction took pages at the end of the file
    /// for a large value and freed them before it committed: LMDB's last
    /// page is past the file's end, and those pages are on the free list.
    /// Returns the file, its page size and LMDB's last page.
    fn store_with_a_free_tail(dir: &std::path::Path) -> (std::path::PathBuf, usize, u64) {
        let (env, db) = rows_env(dir);
        let put_all = |byte: u8| {
            let mut wtxn = env.write_txn().unwrap();
            for i in 0..100u32 {
                db.put(&mut wtxn, &i.to_be_bytes(), &[byte; 100]).unwrap();
            }
            wtxn.commit().unwrap();
        };
        // The second writes every page anew: the first's are free.
        put_all(1);
        put_all(2);
        // A small write takes a free page (reading the free list); a large
        // value's run of pages is then taken past the file's end, and
        // freed when the value is deleted.
        let mut wtxn = env.write_txn().unwrap();
        db.put(&mut wtxn, b"small", b"x").unwrap();
        db.put(&mut wtxn, b"large", &[3; 64 * 1024]).unwrap();
        db.delete(&mut wtxn, b"large").unwrap();
        wtxn.commit().unwrap();
        let page_bytes = env.unnamed_database_stat().page_size as usize;
        let last_page = env.info().last_page_number as u64;
        (dir.join("data.mdb"), page_bytes, last_page)
    }

    /// A free list whose tree has branch pages reads whole: with a reader
    /// held open, so no freed page is taken again, each of hundreds of
    /// transactions adds an entry. Every page LMDB has used is then a meta
    /// page, a page of a tree (the free list's own included) or free.
    #[test]
    fn a_free_list_of_several_pages_reads_whole() {
        let dir = tempfile::tempdir().unwrap();
        let (env, db) = rows_env(dir.path());
        let reader = env.read_txn().unwrap();
        for i in 0..600u32 {
            let mut wtxn = env.write_txn().unwrap();
            db.put(&mut wtxn, &(i % 50).to_be_bytes(), &[i as u8; 200])
                .unwrap();
            wtxn.commit().unwrap();
        }
        // Entries stay until a write takes their pages.
        drop(reader);
        let rtxn = env.read_txn().unwrap();
        let pages_of =
            |s: heed::DatabaseStat| (s.branch_pages + s.leaf_pages + s.overflow_pages) as u64;
        let tree_pages = pages_of(env.unnamed_database_stat()) + pages_of(db.stat(&rtxn).unwrap());
        let page_bytes = env.unnamed_database_stat().page_size as usize;
        let last_page = env.info().last_page_number as u64;
        let file = File::open(dir.path().join("data.mdb")).unwrap();
        let file_pages = file.metadata().unwrap().len() / page_bytes as u64;
        let pages = Pages {
            file: &file,
            page_bytes,
            file_pages,
        };
        let meta = pages.newer_meta().unwrap().unwrap();
        let free_db = |at: usize| u64_at(&meta, FREE_DB_AT + at);
        let depth = u16_at(&meta, FREE_DB_AT + 6);
        assert!(depth >= 2, "the free list's tree is {depth} deep");
        let free_db_pages = free_db(8) + free_db(16) + free_db(24);
        let free = pages.free_past(0).unwrap().expect("the free list reads");
        assert_eq!(
            2 + tree_pages + free_db_pages + free.len() as u64,
            last_page + 1
        );
    }

    /// A store whose file ends before LMDB's last page, the pages past its
    /// end free, opens; cut short, it is refused (and the free list read
    /// from what is left does not name the missing pages free).
    #[test]
    fn a_file_that_ends_before_free_pages_opens_and_one_cut_short_does_not() {
        let dir = tempfile::tempdir().unwrap();
        let (path, page_bytes, last_page) = store_with_a_free_tail(dir.path());
        let file_pages = std::fs::metadata(&path).unwrap().len() / page_bytes as u64;
        assert!(
            file_pages <= last_page,
            "the test's store ends at page {file_pages}, after LMDB's last page {last_page}"
        );
        let file = File::open(&path).unwrap();
        assert!(missing_pages_are_free(&file, page_bytes, file_pages, last_page).unwrap());
        drop(super::super::open_env(dir.path(), 64 << 20).expect("a whole store opens"));

        let cut = OpenOptions::new().write(true).open(&path).unwrap();
        cut.set_len(2 * page_bytes as u64).unwrap();
        assert!(!missing_pages_are_free(&file, page_bytes, 2, last_page).unwrap());
        match super::super::open_env(dir.path(), 64 << 20) {
            Err(super::super::StoreError::Truncated {
                file_bytes,
                needed_bytes,
                ..
            }) => {
                assert_eq!(file_bytes, 2 * page_bytes as u64);
                assert_eq!(needed_bytes, (last_page + 1) * page_bytes as u64);
            }
            other => panic!("not refused as cut short: {:?}", other.map(|_| ())),
        }
    }
}
