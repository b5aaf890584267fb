// The expression tree of the mask/score language: immutable nodes shared by pointer.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/dsl/value.hpp"

namespace flashjit::dsl {

enum class ExprKind : uint8_t { IntLit, FloatLit, BoolLit, Var, Param, TensorRead, Unary, Binary, Select, Call, Shorthand };
enum class Builtin : uint8_t { B, H, HKv, Q, Kv, SeqQ, SeqKv, Score };
enum class UnOp : uint8_t { Neg, Not };
enum class BinOp : uint8_t { Add, Sub, Mul, Div, Mod, Lt, Le, Gt, Ge, Eq, Ne, And, Or };
enum class Fn : uint8_t { Min, Max, Abs, Exp, Exp2, Log, Tanh, Sqrt, Floor, Where };
// Mask shorthands stay nodes (not expanded at parse time) so the printer keeps what the user
// wrote; desugar.hpp gives their meaning as ordinary expressions.
enum class Shorthand : uint8_t { Causal, CausalBr, Window, Prefix, Document };

struct Expr;
using ExprPtr = std::shared_ptr<const Expr>;

struct Expr {
  ExprKind kind = ExprKind::IntLit;
  // Set by the type checker (typecheck.hpp); parse trees have typed == false.
  Type type = Type::I32;
  bool typed = false;

  int32_t int_value = 0;
  float float_value = 0.0f;
  bool bool_value = false;
  Builtin var = Builtin::Q;
  UnOp un = UnOp::Neg;
  BinOp bin = BinOp::Add;
  Fn fn = Fn::Min;
  Shorthand sh = Shorthand::Causal;
  std::string name;   // Param, TensorRead, and the tensor of document(t)
  int slot = -1;      // index into Spec::params / Spec::tensors once checked
  std::vector<ExprPtr> args;

  uint32_t pos = 0;   // byte span in the expression text, for diagnostics
  uint32_t len = 0;
};

ExprPtr make_int(int32_t v, uint32_t pos = 0, uint32_t len = 0);
ExprPtr make_float(float v, uint32_t pos = 0, uint32_t len = 0);
ExprPtr make_bool(bool v, uint32_t pos = 0, uint32_t len = 0);
ExprPtr make_var(Builtin v, uint32_t pos = 0, uint32_t len = 0);
ExprPtr make_param(std::string name, uint32_t pos = 0, uint32_t len = 0);
ExprPtr make_tensor_read(std::string name, std::vector<ExprPtr> indices, uint32_t pos = 0, uint32_t len = 0);
ExprPtr make_unary(UnOp op, ExprPtr a, uint32_t pos = 0, uint32_t len = 0);
ExprPtr make_binary(BinOp op, ExprPtr a, ExprPtr b, uint32_t pos = 0, uint32_t len = 0);
ExprPtr make_select(ExprPtr c, ExprPtr a, ExprPtr b, uint32_t pos = 0, uint32_t len = 0);
ExprPtr make_call(Fn fn, std::vector<ExprPtr> args, uint32_t pos = 0, uint32_t len = 0);
ExprPtr make_shorthand(Shorthand s, std::vector<ExprPtr> args, std::string tensor = {}, uint32_t pos = 0, uint32_t len = 0);

// A copy of `e` with its type set (and optionally slot), used by passes that annotate.
ExprPtr with_type(const Expr& e, Type t, std::vector<ExprPtr> args, int slot = -1);

std::string_view builtin_name(Builtin v);
std::optional<Builtin> builtin_from_name(std::string_view s);
std::string_view binop_spelling(BinOp op);
std::string_view fn_name(Fn fn);
std::optional<Fn> fn_from_name(std::string_view s);
std::string_view shorthand_name(Shorthand s);
std::optional<Shorthand> shorthand_from_name(std::string_view s);
size_t fn_arity(Fn fn);
bool is_comparison(BinOp op);
bool is_arithmetic(BinOp op);

// Words that always mean the same (builtins, causal, causal_br, true, false); params and
// tensors may not take them. Function and shorthand names are keywords only before '('.
const std::vector<std::string>& reserved_words();

// Structural equality: kinds, operators, names, literal values and children; ignores spans.
bool same_expr(const Expr& a, const Expr& b);
// Does `e` read the builtin `v` anywhere (shorthands count as reading q and kv)?
bool mentions(const Expr& e, Builtin v);
bool reads_tensor(const Expr& e);
size_t node_count(const Expr& e);

}  // namespace flashjit::dsl
