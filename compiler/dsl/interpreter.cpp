#include "compiler/dsl/interpreter.hpp"

#include <cmath>
#include <cstring>
#include <string>

namespace flashjit::dsl {

namespace {

int32_t wrap(int64_t v) { return static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(v))); }

int32_t idiv(int32_t a, int32_t b) {
  if (b == 0) return 0;
  if (a == INT32_MIN && b == -1) return INT32_MIN;
  return a / b;
}
int32_t imod(int32_t a, int32_t b) {
  if (b == 0) return a;
  if (a == INT32_MIN && b == -1) return 0;
  return a % b;
}

Value arith(BinOp op, const Value& a, const Value& b) {
  if (a.type == Type::I32 && b.type == Type::I32) {
    int64_t x = a.i, y = b.i;
    switch (op) {
      case BinOp::Add: return Value::of_i32(wrap(x + y));
      case BinOp::Sub: return Value::of_i32(wrap(x - y));
      case BinOp::Mul: return Value::of_i32(wrap(x * y));
      case BinOp::Div: return Value::of_i32(idiv(a.i, b.i));
      default: return Value::of_i32(imod(a.i, b.i));
    }
  }
  float x = a.as_f32(), y = b.as_f32();
  switch (op) {
    case BinOp::Add: return Value::of_f32(x + y);
    case BinOp::Sub: return Value::of_f32(x - y);
    case BinOp::Mul: return Value::of_f32(x * y);
    case BinOp::Div: return Value::of_f32(x / y);
    default: return Value::of_f32(std::fmod(x, y));
  }
}

bool compare(BinOp op, const Value& a, const Value& b) {
  if (a.type == Type::Bool) return op == BinOp::Eq ? a.b == b.b : a.b != b.b;
  if (a.type == Type::I32 && b.type == Type::I32) {
    switch (op) {
      case BinOp::Lt: return a.i < b.i;
      case BinOp::Le: return a.i <= b.i;
      case BinOp::Gt: return a.i > b.i;
      case BinOp::Ge: return a.i >= b.i;
      case BinOp::Eq: return a.i == b.i;
      default: return a.i != b.i;
    }
  }
  float x = a.as_f32(), y = b.as_f32();
  switch (op) {
    case BinOp::Lt: return x < y;
    case BinOp::Le: return x <= y;
    case BinOp::Gt: return x > y;
    case BinOp::Ge: return x >= y;
    case BinOp::Eq: return x == y;
    default: return x != y;
  }
}

// A branch of ?: / where / min / max takes the node's (promoted) type.
Value coerce(const Value& v, Type t) { return t == Type::F32 && v.type == Type::I32 ? Value::of_f32(v.as_f32()) : v; }

int32_t read_index(const Expr& e, const Env& env, const TensorData& td, size_t& flat, size_t dim) {
  Value v = eval(*e.args[dim], env);
  if (v.i < 0 || v.i >= td.dims[dim])
    throw EvalError("index " + std::to_string(v.i) + " is out of range for dim " + std::to_string(dim) + " of tensor '" +
                    e.name + "' (size " + std::to_string(td.dims[dim]) + ")");
  flat = flat * static_cast<size_t>(td.dims[dim]) + static_cast<size_t>(v.i);
  return v.i;
}

Value read_tensor(const Expr& e, const Env& env) {
  if (e.slot < 0 || static_cast<size_t>(e.slot) >= env.tensors.size())
    throw EvalError("tensor '" + e.name + "' has no data in this evaluation");
  const TensorData& td = env.tensors[e.slot];
  if (td.dims.size() != e.args.size() || !td.data) throw EvalError("tensor '" + e.name + "' has the wrong rank or no data");
  size_t flat = 0;
  for (size_t d = 0; d < e.args.size(); ++d) read_index(e, env, td, flat, d);
  if (td.elem == Type::F32) {
    float f;
    std::memcpy(&f, static_cast<const char*>(td.data) + flat * sizeof(float), sizeof f);
    return Value::of_f32(f);
  }
  int32_t i;
  std::memcpy(&i, static_cast<const char*>(td.data) + flat * sizeof(int32_t), sizeof i);
  return Value::of_i32(i);
}

int32_t read_document(const Expr& e, const Env& env, int32_t pos) {
  if (e.slot < 0 || static_cast<size_t>(e.slot) >= env.tensors.size())
    throw EvalError("tensor '" + e.name + "' has no data in this evaluation");
  const TensorData& td = env.tensors[e.slot];
  size_t flat = 0;
  int64_t idx[2] = {env.b, pos};
  size_t first = td.dims.size() == 2 ? 0 : 1;
  for (size_t d = first; d < 2; ++d) {
    int64_t extent = td.dims[d - first];
    if (idx[d] < 0 || idx[d] >= extent)
      throw EvalError("index " + std::to_string(idx[d]) + " is out of range for dim " + std::to_string(d - first) +
                      " of tensor '" + e.name + "' (size " + std::to_string(extent) + ")");
    flat = flat * static_cast<size_t>(extent) + static_cast<size_t>(idx[d]);
  }
  int32_t v;
  std::memcpy(&v, static_cast<const char*>(td.data) + flat * sizeof(int32_t), sizeof v);
  return v;
}

}  // namespace

Value eval(const Expr& e, const Env& env) {
  switch (e.kind) {
    case ExprKind::IntLit: return Value::of_i32(e.int_value);
    case ExprKind::FloatLit: return Value::of_f32(e.float_value);
    case ExprKind::BoolLit: return Value::of_bool(e.bool_value);
    case ExprKind::Var:
      switch (e.var) {
        case Builtin::B: return Value::of_i32(env.b);
        case Builtin::H: return Value::of_i32(env.h);
        case Builtin::HKv: return Value::of_i32(env.h_kv);
        case Builtin::Q: return Value::of_i32(env.q);
        case Builtin::Kv: return Value::of_i32(env.kv);
        case Builtin::SeqQ: return Value::of_i32(env.seq_q);
        case Builtin::SeqKv: return Value::of_i32(env.seq_kv);
        case Builtin::Score: return Value::of_f32(env.score);
      }
      break;
    case ExprKind::Param:
      if (e.slot < 0 || static_cast<size_t>(e.slot) >= env.params.size())
        throw EvalError("param '" + e.name + "' has no value in this evaluation");
      if (e.type == Type::I32 && env.params[e.slot].type != Type::I32)
        throw EvalError("param '" + e.name + "' is i32 but its value is " + std::string(type_name(env.params[e.slot].type)));
      return coerce(env.params[e.slot], e.type);
    case ExprKind::TensorRead: return read_tensor(e, env);
    case ExprKind::Unary: {
      Value a = eval(*e.args[0], env);
      if (e.un == UnOp::Not) return Value::of_bool(!a.b);
      if (a.type == Type::I32) return Value::of_i32(wrap(-static_cast<int64_t>(a.i)));
      return Value::of_f32(-a.f);
    }
    case ExprKind::Binary: {
      if (e.bin == BinOp::And) return Value::of_bool(eval(*e.args[0], env).b && eval(*e.args[1], env).b);
      if (e.bin == BinOp::Or) return Value::of_bool(eval(*e.args[0], env).b || eval(*e.args[1], env).b);
      Value a = eval(*e.args[0], env);
      Value b = eval(*e.args[1], env);
      if (is_arithmetic(e.bin)) return arith(e.bin, a, b);
      return Value::of_bool(compare(e.bin, a, b));
    }
    case ExprKind::Select: return coerce(eval(*e.args[eval(*e.args[0], env).b ? 1 : 2], env), e.type);
    case ExprKind::Call: {
      if (e.fn == Fn::Where) return coerce(eval(*e.args[eval(*e.args[0], env).b ? 1 : 2], env), e.type);
      Value a = eval(*e.args[0], env);
      if (e.fn == Fn::Min || e.fn == Fn::Max) {
        Value b = eval(*e.args[1], env);
        if (a.type == Type::I32 && b.type == Type::I32)
          return Value::of_i32(e.fn == Fn::Min ? std::min(a.i, b.i) : std::max(a.i, b.i));
        return Value::of_f32(e.fn == Fn::Min ? std::fmin(a.as_f32(), b.as_f32()) : std::fmax(a.as_f32(), b.as_f32()));
      }
      if (e.fn == Fn::Abs) {
        if (a.type == Type::I32) return Value::of_i32(a.i < 0 ? wrap(-static_cast<int64_t>(a.i)) : a.i);
        return Value::of_f32(std::fabs(a.f));
      }
      float x = a.as_f32();
      switch (e.fn) {
        case Fn::Exp: return Value::of_f32(std::exp(x));
        case Fn::Exp2: return Value::of_f32(std::exp2(x));
        case Fn::Log: return Value::of_f32(std::log(x));
        case Fn::Tanh: return Value::of_f32(std::tanh(x));
        case Fn::Sqrt: return Value::of_f32(std::sqrt(x));
        default: return Value::of_f32(std::floor(x));
      }
    }
    case ExprKind::Shorthand: {
      // Mirrors desugar.cpp; the tests check the two agree everywhere.
      int64_t q = env.q, kv = env.kv;
      switch (e.sh) {
        case Shorthand::Causal: return Value::of_bool(q >= kv);
        case Shorthand::CausalBr: return Value::of_bool(wrap(wrap(q + env.seq_kv) - static_cast<int64_t>(env.seq_q)) >= kv);
        case Shorthand::Window: {
          int32_t l = eval(*e.args[0], env).i, r = eval(*e.args[1], env).i;
          return Value::of_bool(kv >= wrap(q - l) && kv <= wrap(q + r));
        }
        case Shorthand::Prefix: return Value::of_bool(kv < eval(*e.args[0], env).i);
        case Shorthand::Document: return Value::of_bool(read_document(e, env, env.q) == read_document(e, env, env.kv));
      }
      break;
    }
  }
  throw EvalError("internal: cannot evaluate this expression");
}

bool eval_mask(const Expr& mask, const Env& env) { return eval(mask, env).b; }
float eval_score(const Expr& score, const Env& env) { return eval(score, env).as_f32(); }

}  // namespace flashjit::dsl
