// T.reinterpretcast(dst, src): the original declares dst anew as a view of src's bytes, in
// effect to the end of the C++ block it is written in. tilepipe copies the bytes at the cast
// (tile.reinterpret, no cycles), which is the view exactly when nothing could tell the two
// apart; the rules below keep kernels to that and name the line where they would not.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <vector>

#include "verify/verify_internal.h"

namespace tilepipe::verify_detail {

namespace {

/// Every leaf in program order: the on-chip buffers it reads and writes, and the chain of
/// statements enclosing it (for "inside the cast's block").
struct Leaf {
  const StmtNode* node;
  std::set<int> reads, writes;
  std::vector<const StmtNode*> path;

  bool within(const StmtNode* block) const {
    return std::find(path.begin(), path.end(), block) != path.end();
  }
  /// The leaf as a well-formed cast (malformed ones are bad-operand errors), or null.
  const TileOpStmt* cast() const {
    auto* t = std::get_if<TileOpStmt>(&node->node);
    return t && t->op == TileOpKind::Reinterpret && t->srcs.size() == 1 && t->dst.buffer &&
                   t->srcs[0].buffer
               ? t
               : nullptr;
  }
};

class Leaves : public StmtVisitor {
 public:
  std::vector<Leaf> leaves;

  void visit_seq(const SeqStmt& s, const StmtNode& n) override {
    nest(n, [&] { StmtVisitor::visit_seq(s, n); });
  }
  void visit_for(const ForStmt& s, const StmtNode& n) override {
    nest(n, [&] { StmtVisitor::visit_for(s, n); });
  }
  void visit_if(const IfStmt& s, const StmtNode& n) override {
    nest(n, [&] { StmtVisitor::visit_if(s, n); });
  }
  void visit_scope(const ScopeStmt& s, const StmtNode& n) override {
    nest(n, [&] { StmtVisitor::visit_scope(s, n); });
  }
  void visit_copy(const CopyStmt& s, const StmtNode& n) override { leaf(n, {&s.src}, {&s.dst}); }
  void visit_gemm(const GemmStmt& s, const StmtNode& n) override {
    leaf(n, {&s.a, &s.b, &s.c}, {&s.c});
  }
  void visit_tile(const TileOpStmt& s, const StmtNode& n) override {
    std::vector<const Region*> in;
    for (const auto& r : s.srcs) in.push_back(&r);
    if (s.scalar)
      if (auto* r = std::get_if<Region>(&s.scalar->value)) in.push_back(r);
    leaf(n, in, {&s.dst});
  }
  void visit_reduce(const ReduceStmt& s, const StmtNode& n) override {
    leaf(n, {&s.src, &s.dst}, {&s.dst});
  }

 private:
  std::vector<const StmtNode*> path_;

  template <class F>
  void nest(const StmtNode& n, F&& body) {
    path_.push_back(&n);
    body();
    path_.pop_back();
  }
  void leaf(const StmtNode& n, std::vector<const Region*> in, std::vector<const Region*> out) {
    Leaf l{&n, {}, {}, path_};
    for (const Region* r : in)
      if (r->buffer) l.reads.insert(r->buffer->id);  // unassigned: a bad-operand error
    for (const Region* r : out)
      if (r->buffer) l.writes.insert(r->buffer->id);
    for (const auto* r : in)
      for (const auto& e : r->start) loaded_buffers(e, l.reads);
    for (const auto* r : out)
      for (const auto& e : r->start) loaded_buffers(e, l.reads);
    leaves.push_back(std::move(l));
  }
};

/// Whether the program casts at all: most do not, and the walk below builds a set per leaf.
class HasCast : public StmtVisitor {
 public:
  bool found = false;
  void visit_tile(const TileOpStmt& s, const StmtNode&) override {
    found = found || s.op == TileOpKind::Reinterpret;
  }
};

}  // namespace

void Verifier::check_reinterpret() {
  HasCast any;
  any.visit(p_.body);
  if (!any.found) return;
  Leaves w;
  w.visit(p_.body);
  const auto& ls = w.leaves;
  struct Cast {
    size_t at;
    const StmtNode* block;  // the statement whose body holds the cast
    int src;
  };
  std::map<int, std::vector<Cast>> casts;  // by dst buffer id, in program order
  std::map<int, std::string> names;
  for (size_t i = 0; i < ls.size(); ++i) {
    const TileOpStmt* t = ls[i].cast();
    if (!t) continue;
    // The cast's block: the innermost loop, branch, scope or body around it. A sequence
    // that is not a body (its location is not its parent's) is a front end's group of one
    // source statement (KernelBuilder::begin_block), not a block of the source.
    const StmtNode* block = nullptr;
    const auto& path = ls[i].path;
    for (size_t j = path.size(); j-- > 0 && !block;) {
      bool group = false;
      if (std::holds_alternative<SeqStmt>(path[j]->node) && j > 0) {
        group =
            std::holds_alternative<SeqStmt>(path[j - 1]->node) || path[j]->loc != path[j - 1]->loc;
      }
      if (!group) block = path[j];
    }
    casts[t->dst.buffer->id].push_back({i, block, t->srcs[0].buffer->id});
    names[t->dst.buffer->id] = t->dst.buffer->name;
    names[t->srcs[0].buffer->id] = t->srcs[0].buffer->name;
  }
  const std::string fix =
      "copy the values with T.copy / T.tile.cast instead, or keep the view's uses between the "
      "cast and the end of its block with no write of either buffer in between";
  for (const auto& [dst, cs] : casts) {
    const int src = cs.front().src;
    const std::string& dn = names[dst];
    const std::string& sn = names[src];
    for (size_t i = 0; i < ls.size(); ++i) {
      const Leaf& l = ls[i];
      const TileOpStmt* t = l.cast();
      const bool is_cast = t && t->dst.buffer->id == dst;
      if (is_cast && t->srcs[0].buffer->id != src) {
        error(l.node->loc, "reinterpret",
              fmt::format("'{}' is made a view of '{}' here and of '{}' at line {}", dn,
                          names.count(t->srcs[0].buffer->id) ? names[t->srcs[0].buffer->id] : "?",
                          sn, ls[cs.front().at].node->loc.line),
              "give each view its own buffer");
        continue;
      }
      if (l.writes.count(dst) && !is_cast) {
        error(l.node->loc, "reinterpret",
              fmt::format("this op writes '{}', a T.reinterpretcast view of '{}': tilepipe "
                          "models the view as a copy of the bytes at the cast, which a write "
                          "to the view would not reach",
                          dn, sn),
              fix);
        continue;
      }
      if (!l.reads.count(dst) || is_cast) continue;
      // the latest cast before this read, within whose block the read must be
      const Cast* last = nullptr;
      for (const auto& c : cs)
        if (c.at < i) last = &c;
      if (!last) {
        error(l.node->loc, "reinterpret",
              fmt::format("this op reads '{}' before it is made a view of '{}' (T.reinterpretcast "
                          "at line {})",
                          dn, sn, ls[cs.front().at].node->loc.line),
              fix);
        continue;
      }
      if (last->block && !l.within(last->block)) {
        error(l.node->loc, "reinterpret",
              fmt::format("this op reads '{}' outside the block of its T.reinterpretcast (line "
                          "{}), where the original's view is out of scope and '{}' is its own "
                          "buffer again",
                          dn, ls[last->at].node->loc.line, dn),
              fix);
        continue;
      }
      for (size_t k = last->at + 1; k < i; ++k)
        if (ls[k].writes.count(src)) {
          error(l.node->loc, "reinterpret",
                fmt::format("this op reads '{}', a view of '{}', after '{}' was written at "
                            "line {} (after the cast at line {}): tilepipe's copy at the cast "
                            "would not see that write",
                            dn, sn, sn, ls[k].node->loc.line, ls[last->at].node->loc.line),
                fix);
          break;
        }
    }
    // Across iterations of a loop around a read of the view: a later write of src reaches
    // the next iteration's read only through a cast in between (after the write, or before
    // the read, in the loop's body).
    // The first write of src with no cast between it and the next iteration's read r, in a
    // loop around r; ls.size() if none.
    auto unsynced_write = [&](size_t r) {
      for (const auto* loop : ls[r].path) {
        if (!std::holds_alternative<ForStmt>(loop->node)) continue;
        for (size_t k = r + 1; k < ls.size(); ++k) {
          if (!ls[k].writes.count(src) || !ls[k].within(loop)) continue;
          bool synced = false;
          for (const auto& c : cs)
            synced = synced || (ls[c.at].within(loop) && (c.at > k || c.at < r));
          if (!synced) return k;
        }
      }
      return ls.size();
    };
    for (size_t r = 0; r < ls.size(); ++r) {
      if (!ls[r].reads.count(dst)) continue;
      const size_t k = unsynced_write(r);
      if (k == ls.size()) continue;
      error(ls[k].node->loc, "reinterpret",
            fmt::format("this op writes '{}' in a loop that reads its T.reinterpretcast "
                        "view '{}' (line {}) earlier in the body: the next iteration's "
                        "read would see this write, tilepipe's copy at the cast would not",
                        sn, dn, ls[r].node->loc.line),
            fix);
      break;  // once per view
    }
  }
}

}  // namespace tilepipe::verify_detail
