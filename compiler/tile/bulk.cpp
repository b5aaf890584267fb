#include "compiler/tile/bulk.hpp"

#include "compiler/tile/inline_ptx.hpp"

namespace flashjit::tile {

namespace {

void asm_void(Emitter& e, const std::vector<llvm::Value*>& args, const std::string& text, const std::string& constraints) {
  inline_ptx(e, e.b.getVoidTy(), args, text, constraints);
}

}  // namespace

llvm::Value* tensor_map_address(Emitter& e, const std::string& param) {
  return inline_ptx(e, e.i64(), {}, "mov.b64 $0, " + param + ";\n\tcvta.param.u64 $0, $0;", "=l",
                    /*side_effects=*/false);
}

void tensor_load_4d(Emitter& e, llvm::Value* dst, llvm::Value* map, const std::array<llvm::Value*, 4>& at,
                    llvm::Value* bar) {
  asm_void(
      e, {dst, map, at[0], at[1], at[2], at[3], bar},
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [$0], [$1, {$2, $3, $4, $5}], "
      "[$6];",
      "r,l,r,r,r,r,r,~{memory}");
}

void tensor_store_4d(Emitter& e, llvm::Value* src, llvm::Value* map, const std::array<llvm::Value*, 4>& at) {
  asm_void(e, {map, at[0], at[1], at[2], at[3], src},
           "cp.async.bulk.tensor.4d.global.shared::cta.tile.bulk_group [$0, {$1, $2, $3, $4}], [$5];",
           "l,r,r,r,r,r,~{memory}");
}

void bulk_reduce_add_f32(Emitter& e, llvm::Value* global_ptr, llvm::Value* shared_addr, llvm::Value* bytes) {
  asm_void(e, {global_ptr, shared_addr, bytes},
           "cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [$0], [$1], $2;", "l,r,r,~{memory}");
}

void bulk_commit(Emitter& e) { asm_void(e, {}, "cp.async.bulk.commit_group;", "~{memory}"); }

void bulk_wait(Emitter& e, bool read) {
  asm_void(e, {}, read ? "cp.async.bulk.wait_group.read 0;" : "cp.async.bulk.wait_group 0;", "~{memory}");
}

}  // namespace flashjit::tile
