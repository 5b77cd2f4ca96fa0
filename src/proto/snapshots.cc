#include "proto/snapshots.h"

#include "core/chunker.h"
#include "proto/json_codec.h"

namespace gpupool::proto {

std::vector<std::string> ManifestPieces(const SnapshotManifest& manifest) {
  const std::string text = Dump(Encode(manifest));
  if (text.size() <= static_cast<size_t>(ChunkSizes{}.max)) return {text};
  std::vector<std::string> pieces;
  Chunker chunker;
  std::string_view rest = text;
  std::string piece;
  while (!rest.empty()) {
    const size_t used = chunker.Feed(rest);
    piece.append(rest.substr(0, used));
    rest.remove_prefix(used);
    if (chunker.at_boundary()) pieces.push_back(std::exchange(piece, {}));
  }
  if (!piece.empty()) pieces.push_back(std::move(piece));
  return pieces;
}

std::string ManifestRoot(const std::vector<std::string>& part_sha256s) {
  SnapshotManifest root;
  root.parts = part_sha256s;
  return Dump(Encode(root));
}

Result<SnapshotManifest> DecodeManifest(
    std::string_view stored, const std::function<Result<std::string>(const std::string&)>& part) {
  Result<SnapshotManifest> root = DecodeBody<SnapshotManifest>(stored, /*required=*/true);
  if (!root) return tl::unexpected(root.error());
  if (root->parts.empty()) return root;
  if (!root->files.empty() || !root->dirs.empty() || root->image) {
    return InvalidArgument("a manifest's root lists parts and files both");
  }
  std::string text;
  for (const std::string& sha : root->parts) {
    Result<std::string> bytes = part(sha);
    if (!bytes) {
      return MakeError(bytes.error().code, "manifest part " + sha + ": " + bytes.error().message);
    }
    text += *bytes;
  }
  Result<SnapshotManifest> whole = DecodeBody<SnapshotManifest>(text, /*required=*/true);
  if (!whole) return tl::unexpected(whole.error());
  if (!whole->parts.empty()) return InvalidArgument("a manifest's part is a root itself");
  whole->parts = std::move(root->parts);
  return whole;
}

}  // namespace gpupool::proto
