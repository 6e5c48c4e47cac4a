"""The framed .tar.zst archive: tar, zstd frames, units, the frame table, pack, unpack, the pack cache."""
