#include "helpers.hpp"

#include "compiler/dsl/diagnostic.hpp"

namespace flashjit::dsl::test {

Decls Decls::standard() {
  Decls d;
  d.params = {Param{"lo", Type::I32, Value::of_i32(0)}, Param{"n", Type::I32, Value::of_i32(16)},
              Param{"t", Type::F32, Value::of_f32(1.5f)}, Param{"w", Type::I32, Value::of_i32(8)}};
  d.tensors = {TensorDecl{"doc", Type::I32, {Extent::symbolic(Extent::Kind::SeqKv)}},
               TensorDecl{"val", Type::F32, {Extent::symbolic(Extent::Kind::SeqKv)}}};
  return d;
}

ExprPtr compile(const std::string& text, const Decls& d, ExprRole role) {
  Scope s{role, &d.params, &d.tensors};
  return compile_expr(text, s, ExprOrigin::standalone("<test>", text));
}

Env World::env(int32_t q, int32_t kv, float score) const {
  Env e;
  e.b = b;
  e.h = h;
  e.h_kv = h_kv;
  e.q = q;
  e.kv = kv;
  e.seq_q = seq_q;
  e.seq_kv = seq_kv;
  e.score = score;
  e.params = params;
  e.tensors = tensors;
  return e;
}

World random_world(const Decls& d, std::mt19937& rng, int32_t max_seq) {
  World w;
  w.b = rand_int(rng, 0, 3);
  w.h = rand_int(rng, 0, 7);
  w.h_kv = w.h / 2;
  w.seq_q = rand_int(rng, 1, max_seq);
  w.seq_kv = rand_int(rng, 1, max_seq);
  for (const auto& p : d.params) {
    if (p.type == Type::I32) w.params.push_back(Value::of_i32(rand_int(rng, -20, 60)));
    else w.params.push_back(Value::of_f32(static_cast<float>(rand_int(rng, -400, 400)) / 16.0f));
  }
  size_t n = static_cast<size_t>(std::max(w.seq_q, w.seq_kv));
  for (const auto& t : d.tensors) {
    if (t.elem == Type::I32) {
      std::vector<int32_t> v(n);
      int32_t doc = 0;
      for (auto& x : v) {
        if (rand_int(rng, 0, 9) == 0) ++doc;
        x = doc;
      }
      w.i32_data.push_back(std::move(v));
    } else {
      std::vector<float> v(n);
      for (auto& x : v) x = static_cast<float>(rand_int(rng, -100, 100)) / 8.0f;
      w.f32_data.push_back(std::move(v));
    }
  }
  size_t ii = 0, fi = 0;
  for (const auto& t : d.tensors) {
    TensorData td;
    td.elem = t.elem;
    td.dims = {static_cast<int64_t>(n)};
    td.data = t.elem == Type::I32 ? static_cast<const void*>(w.i32_data[ii++].data()) : static_cast<const void*>(w.f32_data[fi++].data());
    w.tensors.push_back(td);
  }
  return w;
}

namespace {

std::string pick(std::mt19937& rng, std::initializer_list<const char*> xs) {
  auto it = xs.begin();
  std::advance(it, rand_int(rng, 0, static_cast<int>(xs.size()) - 1));
  return *it;
}

std::string int_expr(std::mt19937& rng, bool affine, int depth) {
  if (depth <= 0 || rand_int(rng, 0, 2) == 0) {
    switch (rand_int(rng, 0, affine ? 5 : 7)) {
      case 0: return "q";
      case 1: return "kv";
      case 2: return pick(rng, {"seq_q", "seq_kv"});
      case 3: return pick(rng, {"lo", "n", "w"});
      case 4: case 5: return std::to_string(rand_int(rng, -40, 40));
      case 6: return pick(rng, {"b", "h", "h_kv"});
      default: return pick(rng, {"doc[q]", "doc[kv]"});
    }
  }
  std::string a = int_expr(rng, affine, depth - 1), b = int_expr(rng, affine, depth - 1);
  switch (rand_int(rng, 0, affine ? 3 : 9)) {
    case 0: return "(" + a + " + " + b + ")";
    case 1: return "(" + a + " - " + b + ")";
    case 2: return "(" + a + " * " + std::to_string(rand_int(rng, -3, 3)) + ")";
    case 3: return "-(" + a + ")";
    case 4: return "(" + a + " / " + b + ")";
    case 5: return "(" + a + " % " + b + ")";
    case 6: return "(" + a + " * " + b + ")";
    case 7: return "abs(" + a + ")";
    case 8: return pick(rng, {"min(", "max("}) + a + ", " + b + ")";
    default: return "(" + random_mask(rng, false, 1) + " ? " + a + " : " + b + ")";
  }
}

std::string float_expr(std::mt19937& rng, int depth) {
  if (depth <= 0 || rand_int(rng, 0, 2) == 0) {
    switch (rand_int(rng, 0, 3)) {
      case 0: return "t";
      case 1: return "val[kv]";
      case 2: return std::to_string(rand_int(rng, -20, 20)) + ".5";
      default: return int_expr(rng, false, 1);
    }
  }
  std::string a = float_expr(rng, depth - 1), b = float_expr(rng, depth - 1);
  switch (rand_int(rng, 0, 6)) {
    case 0: return "(" + a + " + " + b + ")";
    case 1: return "(" + a + " * " + b + ")";
    case 2: return "(" + a + " / " + b + ")";
    case 3: return "tanh(" + a + ")";
    case 4: return "floor(" + a + ")";
    case 5: return "exp(" + a + " / 16.0)";
    default: return "sqrt(abs(" + a + "))";
  }
}

}  // namespace

std::string random_mask(std::mt19937& rng, bool affine, int depth) {
  static const char* cmp[] = {" < ", " <= ", " > ", " >= ", " == ", " != "};
  if (depth <= 0 || rand_int(rng, 0, 3) == 0) {
    switch (rand_int(rng, 0, affine ? 6 : 9)) {
      case 0: return "causal";
      case 1: return "causal_br";
      case 2: return "window(" + int_expr(rng, true, 1) + ", " + int_expr(rng, true, 1) + ")";
      case 3: return "prefix(" + int_expr(rng, true, 1) + ")";
      case 4: case 5: return "(" + int_expr(rng, affine, 2) + cmp[rand_int(rng, 0, 5)] + int_expr(rng, affine, 2) + ")";
      case 6: return pick(rng, {"true", "false"});
      case 7: return "document(doc)";
      case 8: return "(" + float_expr(rng, 2) + cmp[rand_int(rng, 0, 5)] + float_expr(rng, 2) + ")";
      default: return "(" + int_expr(rng, false, 2) + cmp[rand_int(rng, 0, 5)] + int_expr(rng, false, 2) + ")";
    }
  }
  std::string a = random_mask(rng, affine, depth - 1), b = random_mask(rng, affine, depth - 1);
  switch (rand_int(rng, 0, 5)) {
    case 0: case 1: return "(" + a + " && " + b + ")";
    case 2: case 3: return "(" + a + " || " + b + ")";
    case 4: return "!(" + a + ")";
    default: return "(" + a + " == " + b + ")";
  }
}

Brute brute_force(const Expr& mask, const World& w, int64_t q0, int64_t q1, int64_t kv0, int64_t kv1) {
  Brute r;
  for (int64_t q = q0; q < q1; ++q)
    for (int64_t kv = kv0; kv < kv1; ++kv) {
      bool v = eval_mask(mask, w.env(static_cast<int32_t>(q), static_cast<int32_t>(kv)));
      r.any |= v;
      r.all &= v;
    }
  return r;
}

}  // namespace flashjit::dsl::test
