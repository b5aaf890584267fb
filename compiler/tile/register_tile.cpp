#include "compiler/tile/register_tile.hpp"

namespace flashjit::tile {

RegTile zero_tile(Emitter& e, int m_tiles, int n_tiles) {
  return RegTile(m_tiles, std::vector<Acc4>(n_tiles, Acc4{e.cf(0.f), e.cf(0.f), e.cf(0.f), e.cf(0.f)}));
}

RegTile TileVars::load(Emitter& e) const {
  RegTile t(vars.size());
  for (size_t m = 0; m < vars.size(); ++m) {
    t[m].resize(vars[m].size());
    for (size_t n = 0; n < vars[m].size(); ++n)
      for (int i = 0; i < 4; ++i) t[m][n][i] = e.b.CreateLoad(e.f32(), vars[m][n][i]);
  }
  return t;
}

void TileVars::store(Emitter& e, const RegTile& t) const {
  for (size_t m = 0; m < vars.size(); ++m)
    for (size_t n = 0; n < vars[m].size(); ++n)
      for (int i = 0; i < 4; ++i) e.b.CreateStore(t[m][n][i], vars[m][n][i]);
}

}  // namespace flashjit::tile
