// Anchor translation unit: ds_pch exists only to build the precompiled header once.
namespace ds::detail { int pch_anchor = 0; }
