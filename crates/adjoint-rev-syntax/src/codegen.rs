//! Code generation: one IR body to the Rust statements of `f` (or, after `invert`, of `~f`).
//!
//! Every instruction reads its operands into locals, calls the instruction on the locals and writes
//! them back, so `ROT(x[i], x[i + 1], θ)` borrows `x` once at a time; LLVM removes the copies.

use crate::ir::{Keep, Kind, Operand, Rhs, Stmt};
use crate::literal::Literal;
use crate::parse::{is_literal, may_alias, overlaps, strip_parens};
use proc_macro2::{Delimiter, Group, Ident, Span, TokenStream, TokenTree};
use quote::{format_ident, quote, quote_spanned, ToTokens};
use std::cell::Cell;
use syn::visit_mut::VisitMut;
use syn::Expr;

/// Built-in instructions: their types live in the runtime's `instr` module.
const BUILTIN: &[&str] = &[
    "SWAP", "ROT", "IROT", "NEG", "INC", "DEC", "CONJ", "ROTL", "ROTR",
];

pub struct Gen<'a> {
    pub krate: &'a TokenStream,
    pub fname: String,
    pub params: Vec<String>,
    pub backwards: bool,
    /// Code of a gradient pass (unchecked): marked calls push and pop their callees' routine
    /// values on `__rev_kept` ([`mark`]).
    pub keep: bool,
    pub counter: Cell<usize>,
    /// The statement being generated: temporaries are located at it, so type errors in the
    /// generated code point at the user's statement.
    pub at: Cell<Span>,
}

impl Gen<'_> {
    fn tmp(&self) -> Ident {
        let n = self.counter.get();
        self.counter.set(n + 1);
        format_ident!(
            "__rev_{}",
            n,
            span = Span::mixed_site().located_at(self.at.get())
        )
    }

    /// A local of the generated code, `__rev_{name}`: hygienic, as [`tmp`](Self::tmp)'s, so
    /// that user code expanded in its scope (an exponent evaluated again where `before` is
    /// bound) never sees it, nor it a user's variable.
    fn local(&self, name: &str) -> Ident {
        format_ident!(
            "__rev_{}",
            name,
            span = Span::mixed_site().located_at(self.at.get())
        )
    }

    /// The expression with every parameter `p` (a `&mut T`) read through as `(*p)`.
    fn rw(&self, e: &Expr) -> Expr {
        let mut e = e.clone();
        Deref {
            params: &self.params,
        }
        .visit_expr_mut(&mut e);
        e
    }

    /// A condition: [`rw`](Self::rw), and every comparison of a value with an unsuffixed float
    /// literal (`x > 0.0`, `-1.5 <= y[i]`) compares the value's primal
    /// (`RevReal::value(&x) > 0.0`), so conditions on `T: RevReal` read like NiLang's without
    /// `.value()`. Comparisons without a float literal are left as written.
    fn cond(&self, e: &Expr) -> Expr {
        let mut e = self.rw(e);
        LiteralComparisons { krate: self.krate }.visit_expr_mut(&mut e);
        e
    }

    /// An expression of type `String` naming what the condition just checked reads and their
    /// values (`"x = 0.5, n = 3"`), for the message of a failed check: a failed check names the
    /// statement and the values (a hunter: `if (x > 0.0, ~)` failing at `x = 0.5` said only
    /// "true … false"). It reads what the check read, as the check did: `b` of `a && b` only
    /// where `a` holds (`i < v.len() && v[i] > 0.0` reads no `v[i]` out of range), of `a || b`
    /// only where `a` does not; function calls are not called again.
    fn values(&self, cond: &Expr, k: &TokenStream) -> TokenStream {
        let shown = self.local("shown");
        let reads = self.shown_reads(cond, &shown, k);
        quote!({
            #[allow(unused_imports)]
            use #k::{ShowDebug as _, ShowOther as _};
            #[allow(unused_mut)]
            let mut #shown: ::std::vec::Vec<(&str, ::std::string::String)> = ::std::vec::Vec::new();
            #reads
            #shown
                .iter()
                .map(|(t, v)| ::std::format!("{t} = {v}"))
                .collect::<::std::vec::Vec<_>>()
                .join(", ")
        })
    }

    /// The statements of [`values`](Self::values) that push what `e` reads onto `shown`.
    fn shown_reads(&self, e: &Expr, shown: &Ident, k: &TokenStream) -> TokenStream {
        use syn::{BinOp, UnOp};
        // (a number or `true`/`false`: nothing to show)
        let literal = |e: &Expr| is_literal(e) || matches!(strip_parens(e), Expr::Lit(_));
        let logical = |e: &Expr| match strip_parens(e) {
            Expr::Unary(u) => matches!(u.op, UnOp::Not(_)),
            Expr::Binary(b) => !matches!(
                b.op,
                BinOp::Add(_) | BinOp::Sub(_) | BinOp::Mul(_) | BinOp::Div(_) | BinOp::Rem(_)
            ),
            _ => false,
        };
        match strip_parens(e) {
            Expr::Unary(u) if matches!(u.op, UnOp::Not(_)) => self.shown_reads(&u.expr, shown, k),
            Expr::Binary(b) if matches!(b.op, BinOp::And(_) | BinOp::Or(_)) => {
                let left = self.shown_reads(&b.left, shown, k);
                let right = self.shown_reads(&b.right, shown, k);
                let l = self.cond(&b.left);
                let when = if matches!(b.op, BinOp::And(_)) {
                    quote!(#l)
                } else {
                    quote!(!(#l))
                };
                quote!(#left if #when { #right })
            }
            Expr::Binary(b)
                if matches!(
                    b.op,
                    BinOp::Lt(_)
                        | BinOp::Le(_)
                        | BinOp::Gt(_)
                        | BinOp::Ge(_)
                        | BinOp::Eq(_)
                        | BinOp::Ne(_)
                ) =>
            {
                [&*b.left, &*b.right]
                    .into_iter()
                    .filter(|side| !literal(side))
                    .map(|side| {
                        if logical(side) {
                            self.shown_reads(side, shown, k)
                        } else {
                            self.shown_read(side, shown, k)
                        }
                    })
                    .collect()
            }
            e if literal(e) => quote!(),
            e => self.shown_read(e, shown, k),
        }
    }

    /// Push `e` (its text and its value now) onto `shown`, once; not a function call.
    fn shown_read(&self, e: &Expr, shown: &Ident, k: &TokenStream) -> TokenStream {
        if matches!(e, Expr::Call(_)) {
            return quote!();
        }
        let text = crate::parse::pretty(e);
        let place = self.cond(e);
        quote!(
            if !#shown.iter().any(|(t, _)| *t == #text) {
                #shown.push((#text, (&#k::Shown(&(#place))).show()));
            }
        )
    }

    /// A computed argument, checked to carry no gradient: `computed_arg(e)`, located at `e` so that
    /// a type that may (`T`, an array of it) is reported there.
    fn computed_arg(&self, e: &Expr) -> TokenStream {
        let at = syn::spanned::Spanned::span(e);
        let k = respan(self.krate, at);
        let e = self.rw(e);
        quote_spanned!(at=> #k::computed_arg(#e))
    }

    fn site(&self, s: &Stmt) -> TokenStream {
        let k = self.krate;
        let f = &self.fname;
        let t = &s.text;
        // (the statement's own direction: `uncall` runs every statement inverted, `~{ … }`
        // and a routine's uncomputation theirs in either function; taking the function's
        // direction swapped the conditions in their messages; a hunter)
        let b = s.inverted;
        quote!(#k::Site { function: #f, statement: #t, backwards: #b })
    }

    pub fn stmts(&self, stmts: &[Stmt], checks: bool) -> TokenStream {
        stmts.iter().map(|s| self.stmt(s, checks)).collect()
    }

    fn stmt(&self, s: &Stmt, checks: bool) -> TokenStream {
        let span = s.span;
        self.at.set(span);
        // The runtime path carries the statement's span, so type errors point at the statement.
        let k = &respan(self.krate, span);
        match &s.kind {
            Kind::Acc { target, plus, rhs } => {
                let ops = rhs_operands(rhs);
                // An aliased target is never computed with (in checked and unchecked code alike).
                let guard = self.alias_check(Some(target), &ops, s);
                let body = match rhs {
                    Rhs::Arith(_, Operand::Place(a), Operand::Place(b))
                    | Rhs::Op2(_, Operand::Place(a), Operand::Place(b))
                        if may_alias(a, b) =>
                    {
                        if overlaps(a, b) {
                            // `y += x * x`: one place in both operand slots.
                            self.acc(target, *plus, rhs, true, s, checks)
                        } else {
                            // `y += x[i] * x[j]`: the same place exactly when `i == j`.
                            let (ra, rb) = (self.rw(a), self.rw(b));
                            let same = self.acc(target, *plus, rhs, true, s, checks);
                            let distinct = self.acc(target, *plus, rhs, false, s, checks);
                            quote_spanned!(span=> if #k::same(&#ra, &#rb) { #same } else { #distinct })
                        }
                    }
                    _ => self.acc(target, *plus, rhs, false, s, checks),
                };
                quote_spanned!(span=> { #guard #body })
            }
            Kind::Scale { target, mul, x } => {
                let guard = self.alias_check(Some(target), &[x], s);
                let (pre, names, post) = self.load(Some(target), &[x], s);
                let (y, a) = (&names[0], &names[1]);
                // A factor without an exact inverse is an error in unchecked code too: skipping
                // the check would change the result.
                let site = self.site(s);
                let why = self.local("why");
                quote_spanned!(span=> {
                    #guard #pre
                    if let ::core::result::Result::Err(#why) = #k::Scale::try_scale(&mut #y, &mut #a, #mul) {
                        return ::core::result::Result::Err(#k::InvertibilityError::scale(#site, #why));
                    }
                    #post
                })
            }
            Kind::Xor {
                target,
                rhs,
                operands,
            } => {
                let guard = self.alias_check(Some(target), &operands.iter().collect::<Vec<_>>(), s);
                // The target's computed indices evaluated first, as `load` does, so that
                // `v[v.len() - 1] ^= k` does not read `v` inside its own mutable borrow (E0502).
                let mut pre = quote!();
                let t = self.hoist_indices(self.rw(target), &mut pre, span);
                let r = self.rw(rhs);
                quote_spanned!(span=> { #guard #pre #t ^= #r; })
            }
            Kind::Instr {
                name,
                inverse,
                args,
            } => {
                let refs: Vec<&Operand> = args.iter().collect();
                let mut guard = self.alias_check(None, &refs, s);
                let (pre, names, mut post) = self.load(None, &refs, s);
                let builtin = name
                    .get_ident()
                    .is_some_and(|id| BUILTIN.contains(&id.to_string().as_str()));
                // (a user's instruction may write any argument, a built-in the ones it names)
                let writes = name
                    .get_ident()
                    .and_then(|id| crate::parse::builtin_writes(&id.to_string()));
                guard.extend(self.copy_alias_check(
                    args,
                    |j| match writes {
                        Some(w) if !w.contains(&j) => None,
                        _ => Some(quote!(true)),
                    },
                    !*inverse && checks,
                    s,
                ));
                if checks && !builtin {
                    // (a built-in instruction's written arguments are places: `parse`)
                    // (their arguments are read as a call's: a literal is a `Const` too)
                    for (a, n) in args.iter().zip(&names) {
                        if let Operand::Const(c) | Operand::Computed(c) | Operand::Copy(c, _) = a {
                            let text = crate::parse::pretty(c);
                            post.extend(self.constant_check_as(n, &self.rw(c), &text, s));
                        }
                    }
                }
                let path = match name.get_ident() {
                    Some(id) if builtin => quote_spanned!(span=> #k::instr_types::#id),
                    _ => name.to_token_stream(),
                };
                let dir = if *inverse {
                    quote!(inverse)
                } else {
                    quote!(forward)
                };
                quote_spanned!(span=> { #guard #pre <#path as #k::Instruction<_>>::#dir((#(&mut #names,)*)); #post })
            }
            Kind::Call {
                func,
                inverse,
                args,
                keep,
            } => self.call(func, *inverse, args, s, checks, *keep),
            Kind::Let {
                name,
                ty,
                init,
                copy,
            } => {
                let init = self.rw(init);
                let ty = ty.as_ref().map(|t| quote!(: #t));
                // A copy of a variable starts without its gradient (`let a = 0; a += x;`).
                let init = match copy {
                    Some(_) => quote_spanned!(span=> #k::copy_of(#init)),
                    None => init.to_token_stream(),
                };
                quote_spanned!(span=> #[allow(unused_mut, unused_variables)] let mut #name #ty = #init;)
            }
            Kind::Unlet {
                name,
                ty,
                init,
                copy,
            } => {
                // A copy of a variable gives its gradient back to it (`a -= x; unlet a = 0;`).
                let give = copy.as_ref().map(|p| {
                    let mut pre = quote!();
                    let p = self.hoist_indices(self.rw(p), &mut pre, span);
                    quote_spanned!(span=> { #pre #k::Ancilla::give_gradient(&#name, &mut #p); })
                });
                if !checks {
                    return give.unwrap_or_default();
                }
                let init = self.rw(init);
                let ty = ty.as_ref().map(|t| quote!(: #t));
                let site = self.site(s);
                let n = name.to_string();
                let expected = self.tmp();
                quote_spanned!(span=> {
                    let #expected #ty = #init;
                    if !#k::Ancilla::restored(&#name, &#expected) {
                        return ::core::result::Result::Err(#k::InvertibilityError::deallocation(
                            #site, #n, ::std::format!("{:?}", #expected), ::std::format!("{:?}", #name)));
                    }
                    #give
                })
            }
            Kind::If {
                pre,
                post,
                then,
                els,
            } => {
                let c = self.tmp();
                let values = self.values(post, k);
                let (pre, post) = (self.cond(pre), self.cond(post));
                let (then, els) = (self.stmts(then, checks), self.stmts(els, checks));
                let check = if checks {
                    let site = self.site(s);
                    let p = self.tmp();
                    quote_spanned!(span=> {
                        let #p: bool = #post;
                        if #p != #c {
                            return ::core::result::Result::Err(#k::InvertibilityError::condition(#site, #c, #p, #values));
                        }
                    })
                } else {
                    quote!()
                };
                let branch = if els.is_empty() {
                    quote!(if #c { #then })
                } else {
                    quote!(if #c { #then } else { #els })
                };
                quote_spanned!(span=> { let #c: bool = #pre; #branch #check })
            }
            Kind::While {
                pre,
                post,
                post_text,
                body,
                ..
            } => {
                let values = self.values(post, k);
                let (pre, post) = (self.cond(pre), self.cond(post));
                let body = self.stmts(body, checks);
                if !checks {
                    return quote_spanned!(span=> while #pre { #body });
                }
                let site = self.site(s);
                let p = self.tmp();
                quote_spanned!(span=> {
                    if #post {
                        return ::core::result::Result::Err(#k::InvertibilityError::loop_entry(#site, #post_text, #values));
                    }
                    while #pre {
                        #body
                        let #p: bool = #post;
                        if !#p {
                            return ::core::result::Result::Err(#k::InvertibilityError::loop_iteration(#site, #post_text, #values));
                        }
                    }
                })
            }
            Kind::For {
                var,
                start,
                end,
                inclusive,
                step,
                rev,
                body,
            } => {
                let (s0, e0) = (self.tmp(), self.tmp());
                let (start, end) = (self.rw(start), self.rw(end));
                let body = self.stmts(body, checks);
                // The step, when there is one: its value when the loop starts (`t0`) and, for
                // the check after it, again (`t1`): both are shown if the range changed.
                let (t0, t1) = (self.tmp(), self.tmp());
                let (st_let, iter, st_again, st_cmp, st_before, st_after) = match step {
                    Some(st) => {
                        let st = self.rw(st);
                        (
                            quote!(let #t0 = #st;),
                            quote!(#k::steps(#s0, #e0, #t0, #inclusive, #rev)),
                            quote!(let #t1 = #st;),
                            quote!(|| #t1 != #t0),
                            quote!(, #t0),
                            quote!(, #t1),
                        )
                    }
                    None => {
                        let range = if *inclusive {
                            quote!((#s0..=#e0))
                        } else {
                            quote!((#s0..#e0))
                        };
                        let iter = if *rev { quote!(#range.rev()) } else { range };
                        (quote!(), iter, quote!(), quote!(), quote!(), quote!())
                    }
                };
                let check = if checks {
                    let site = self.site(s);
                    let (s1, e1) = (self.tmp(), self.tmp());
                    quote_spanned!(span=> {
                        let #s1 = #start;
                        let #e1 = #end;
                        #st_again
                        if #s1 != #s0 || #e1 != #e0 #st_cmp {
                            return ::core::result::Result::Err(#k::InvertibilityError::bounds(
                                #site,
                                ::std::format!("{:?}", (#s0, #e0 #st_before)),
                                ::std::format!("{:?}", (#s1, #e1 #st_after)),
                            ));
                        }
                    })
                } else {
                    quote!()
                };
                // Checked: a step that is not positive is an error before the loop runs (Rust's
                // `step_by(0)` panics; a negative one has no meaning here).
                let step_check = if checks && step.is_some() {
                    let site = self.site(s);
                    quote_spanned!(span=>
                        if !#k::positive_step(#t0) {
                            return ::core::result::Result::Err(#k::InvertibilityError::undefined(
                                #site,
                                ::std::format!(
                                    "the loop's step is {:?}: a reversible loop's step must be positive \
                                     (a loop that counts down is `(a..b).step_by(k).rev()`, k > 0)",
                                    #t0
                                ),
                            ));
                        }
                    )
                } else {
                    quote!()
                };
                quote_spanned!(span=> {
                    let #s0 = #start;
                    let #e0 = #end;
                    #st_let
                    #step_check
                    for #var in #iter { #body }
                    #check
                })
            }
            Kind::Safe(tokens) => match syn::parse2::<Expr>(tokens.clone()) {
                Ok(e) => {
                    let e = self.rw(&e);
                    quote_spanned!(span=> #e;)
                }
                Err(e) => e.to_compile_error(),
            },
            Kind::NoCheck(b) => self.stmts(b, false),
            Kind::Block(b) => self.stmts(b, checks),
            Kind::Uncompute(inv, routine) => {
                let body = self.stmts(inv, checks);
                // (an inverse's last uncomputation, of the routine it computed first, is skipped
                // alike — except in a gradient pass's inverse half, whose uncomputation takes
                // back what the forward half's routine calls kept)
                if checks || (self.backwards && self.keep) {
                    return body;
                }
                let body = match skip_condition(routine, &self.params, k, self.backwards) {
                    Some(cond) => quote_spanned!(span=> if !(#cond) { #body }),
                    None => body,
                };
                if self.backwards {
                    return body;
                }
                // A gradient pass's forward half keeps the ancillas for the recomputation.
                match keep_plan(routine, &self.params).filter(|_| self.keep) {
                    Some((cond, live)) => {
                        let kept = kept();
                        let pushes = live
                            .iter()
                            .rev()
                            .map(|n| quote_spanned!(span=> #k::Kept::push_cleared(#kept, #n);));
                        quote_spanned!(span=> if #cond { #(#pushes)* } else { #body })
                    }
                    None => body,
                }
            }
            Kind::Recompute(routine) => {
                let body = self.stmts(routine, checks);
                if checks || !self.backwards || !self.keep {
                    return body;
                }
                // A gradient pass's inverse half takes back what its forward half kept (the
                // mirror image of this recomputation is an uncomputation that pushed them).
                match keep_plan(routine, &self.params) {
                    Some((cond, live)) if !live.is_empty() => {
                        let names = &live;
                        let kept = kept();
                        let pops = live
                            .iter()
                            .map(|_| quote_spanned!(span=> #k::Kept::pop(#kept)));
                        // `cond` is a constant; the recomputed values type the popped ones.
                        quote_spanned!(span=>
                            #[allow(unused_mut, unused_variables)]
                            let (#(mut #names,)*) = if #cond { (#(#pops,)*) } else { #body (#(#names,)*) };
                        )
                    }
                    Some((cond, _)) => quote_spanned!(span=> if !(#cond) { #body }),
                    None => body,
                }
            }
            Kind::Routine(..) | Kind::Unroutine(_) | Kind::Inverse(_) => {
                unreachable!("expanded before code generation")
            }
        }
    }

    /// `y ±= rhs` on locals: the target and the operands are read into locals (`same`: the two
    /// operands are one place, read once and passed to the `_same` instruction), the instruction
    /// runs on them and they are written back.
    fn acc(
        &self,
        target: &Expr,
        plus: bool,
        rhs: &Rhs,
        same: bool,
        s: &Stmt,
        checks: bool,
    ) -> TokenStream {
        let span = s.span;
        let k = &respan(self.krate, span);
        let mut ops = rhs_operands(rhs);
        if same {
            ops.truncate(1);
        }
        let (pre, names, post) = self.load(Some(target), &ops, s);
        let y = &names[0];
        // the instruction on the locals `names` (target first), `plus` or its inverse
        let instruction = |names: &[Ident], plus: bool| {
            let y = &names[0];
            match rhs {
                Rhs::Id(_) => {
                    let a = &names[1];
                    quote_spanned!(span=> #k::Arith::acc_id(&mut #y, &mut #a, #plus))
                }
                Rhs::Arith(op, _, _) => {
                    let op = Ident::new(op, span);
                    let a = &names[1];
                    if same {
                        quote_spanned!(span=> #k::Arith::acc_arith_same(&mut #y, #k::Op2::#op, &mut #a, #plus))
                    } else {
                        let b = &names[2];
                        quote_spanned!(span=> #k::Arith::acc_arith(&mut #y, #k::Op2::#op, &mut #a, &mut #b, #plus))
                    }
                }
                Rhs::Op1(op, _) => {
                    let a = &names[1];
                    quote_spanned!(span=> #k::RevReal::acc1(&mut #y, #k::Op1::#op, &mut #a, #plus))
                }
                Rhs::Powi(n, _) => {
                    let a = &names[1];
                    let n = self.rw(n);
                    // an integer of any width, checked into powi's i32 (a float is a compile error at
                    // the exponent)
                    let at = syn::spanned::Spanned::span(&n);
                    let e = quote_spanned!(at=> #k::powi_exponent(#n));
                    quote_spanned!(span=> #k::RevReal::acc1(&mut #y, #k::Op1::Powi(#e), &mut #a, #plus))
                }
                Rhs::Op2(op, _, _) => {
                    let op = Ident::new(op, span);
                    let a = &names[1];
                    if same {
                        quote_spanned!(span=> #k::RevReal::acc2_same(&mut #y, #k::Op2::#op, &mut #a, #plus))
                    } else {
                        let b = &names[2];
                        quote_spanned!(span=> #k::RevReal::acc2(&mut #y, #k::Op2::#op, &mut #a, &mut #b, #plus))
                    }
                }
            }
        };
        let call = instruction(&names, plus);
        if !checks {
            return quote_spanned!(span=> { #pre #call; #post });
        }
        // Checked: a target taken from a finite value to NaN or ±∞ is an error (and is left
        // as it was: the write-back does not run); so is a division by zero on integers or
        // fixed point, before it runs (Rust's `/` would panic there).
        let site = self.site(s);
        // (hygienic: the undo below evaluates the user's exponent again in their scope)
        let (before, v, undone, why) = (
            self.local("before"),
            self.local("v"),
            self.local("undone"),
            self.local("why"),
        );
        let undefined = match rhs {
            Rhs::Arith(op, _, _) if *op == "Div" => {
                let a = &names[1];
                let b = if same { a } else { &names[2] };
                quote_spanned!(span=>
                    if let ::core::option::Option::Some(#why) =
                        #k::Arith::undefined(#k::Op2::Div, &#a, &#b)
                    {
                        return ::core::result::Result::Err(#k::InvertibilityError::undefined(#site, #why));
                    }
                )
            }
            _ => quote!(),
        };
        // A target that was ±∞ stays so under a finite increment, which the inverse takes
        // back; under an infinite one (`−∞ += −∞`, `+∞ += −∞`) it cannot be undone: the step is
        // undone on copies, and refused where that gives NaN (a hunter: log-space code with
        // masked −∞ entries came back NaN from `uncall`, accepted by checked code). Only the
        // NaN is looked for: a complex target's finite part may come back rounded.
        let copies: Vec<Ident> = names.iter().map(|_| self.tmp()).collect();
        let undo = instruction(&copies, !plus);
        let y2 = &copies[0];
        quote_spanned!(span=> {
            #pre
            #undefined
            let #before = #k::Arith::non_finite(&#y);
            #call;
            match #before {
                ::core::option::Option::None => {
                    if let ::core::option::Option::Some(#v) = #k::Arith::non_finite(&#y) {
                        return ::core::result::Result::Err(#k::InvertibilityError::non_finite(#site, #v));
                    }
                }
                ::core::option::Option::Some(#before) if !#before.contains("NaN") => {
                    #[allow(unused_mut)]
                    let (#(mut #copies,)*) = (#(#names,)*);
                    #undo;
                    if let ::core::option::Option::Some(#undone) = #k::Arith::non_finite(&#y2) {
                        if #undone.contains("NaN") {
                            return ::core::result::Result::Err(
                                #k::InvertibilityError::infinite_target(#site, #before, #undone),
                            );
                        }
                    }
                }
                _ => {}
            }
            #post
        })
    }

    /// Read the target (if any) and the operands into locals. Returns the loads, the locals' names
    /// (target first) and the write-backs, then the copies' gradients given back (after every
    /// write-back, so that none overwrites a gradient given to a place it shares storage with).
    /// The caller checks aliasing first.
    fn load(
        &self,
        target: Option<&Expr>,
        ops: &[&Operand],
        s: &Stmt,
    ) -> (TokenStream, Vec<Ident>, TokenStream) {
        let k = self.krate;
        let span = s.span;
        let mut pre = quote!();
        let mut post = quote!();
        let mut given = quote!();
        let mut names = Vec::new();
        if let Some(t) = target {
            let n = self.tmp();
            let t = self.hoist_indices(self.rw(t), &mut pre, span);
            pre.extend(quote_spanned!(span=> let mut #n = #t;));
            post.extend(quote_spanned!(span=> #t = #n;));
            names.push(n);
        }
        for op in ops {
            let n = self.tmp();
            match op {
                Operand::Place(p) => {
                    let p = self.hoist_indices(self.rw(p), &mut pre, span);
                    pre.extend(quote_spanned!(span=> let mut #n = #p;));
                    post.extend(quote_spanned!(span=> #p = #n;));
                }
                Operand::Lit(l) => {
                    // Located at the literal: a literal that does not fit the type is reported
                    // there (while instantiating `lit::<T, …>`).
                    let at = syn::spanned::Spanned::span(l);
                    let ka = respan(k, at);
                    let l = match Literal::parse(l) {
                        Ok(l) => l.tokens(&ka, at),
                        Err(e) => e.to_compile_error(),
                    };
                    // Typed like the target, so a suffix of another type is reported at the
                    // literal ("expected `f64`, found `u64`").
                    match names.first() {
                        Some(y) if target.is_some() => {
                            pre.extend(quote_spanned!(at=> let mut #n = #ka::like(&#y, #l);))
                        }
                        _ => pre.extend(quote_spanned!(span=> let mut #n = #l;)),
                    }
                }
                Operand::Const(c) => {
                    let c = self.rw(c);
                    pre.extend(quote_spanned!(span=> let mut #n = #c;))
                }
                Operand::Computed(c) => {
                    let c = self.computed_arg(c);
                    pre.extend(quote_spanned!(span=> let mut #n = #c;))
                }
                Operand::Copy(c, p) => {
                    // (as a call's: what flows into the copy reaches the place)
                    let c = self.rw(c);
                    pre.extend(quote_spanned!(span=> let mut #n = #k::copy_of(#c);));
                    // (the place the copy was taken from, its indices evaluated with the copy)
                    let p = self.hoist_indices(self.rw(p), &mut pre, span);
                    given.extend(quote_spanned!(span=> #k::Ancilla::give_gradient(&#n, &mut #p);));
                }
            }
            names.push(n);
        }
        post.extend(given);
        (pre, names, post)
    }

    /// A place with each computed index (`x[i % x.len()]`, `m[i][j + 1]`) evaluated once into a
    /// local by `pre`, so the write-back `x[t] = v` does not read `x` inside its own mutable
    /// borrow (E0502 with `x.len()` in the index); indices that are a literal or a name stay.
    fn hoist_indices(&self, e: Expr, pre: &mut TokenStream, span: Span) -> Expr {
        match e {
            Expr::Index(mut i) => {
                *i.expr = self.hoist_indices(*i.expr, pre, span);
                if !matches!(*i.index, Expr::Lit(_) | Expr::Path(_)) {
                    let t = self.tmp();
                    let idx = &i.index;
                    pre.extend(quote_spanned!(span=> let #t = #idx;));
                    *i.index = syn::parse_quote!(#t);
                }
                Expr::Index(i)
            }
            Expr::Field(mut f) => {
                *f.base = self.hoist_indices(*f.base, pre, span);
                Expr::Field(f)
            }
            Expr::Paren(mut p) => {
                *p.expr = self.hoist_indices(*p.expr, pre, span);
                Expr::Paren(p)
            }
            e => e,
        }
    }

    /// Run-time checks that places which may be the same element (`x[i]`, `x[j]`) are not: with a
    /// target, the target against each operand (operands may share a place: `y += x * x`);
    /// without one (instructions and calls), every pair. Emitted in checked and unchecked code
    /// alike: an aliased target or argument would give a wrong result, and the check is a
    /// comparison of two addresses.
    fn alias_check(&self, target: Option<&Expr>, ops: &[&Operand], s: &Stmt) -> TokenStream {
        let places: Vec<&Expr> = ops
            .iter()
            .filter_map(|o| {
                if let Operand::Place(p) = o {
                    Some(p)
                } else {
                    None
                }
            })
            .collect();
        let pairs: Vec<(&Expr, &Expr)> = match target {
            Some(t) => places.iter().map(|p| (t, *p)).collect(),
            None => places
                .iter()
                .enumerate()
                .flat_map(|(i, a)| places[..i].iter().map(move |b| (*b, *a)))
                .collect(),
        };
        let mut checks = quote!();
        let k = self.krate;
        for (b, a) in pairs {
            if may_alias(a, b) {
                let site = self.site(s);
                let (ra, rb) = (self.rw(a), self.rw(b));
                let (ta, tb) = (crate::parse::pretty(a), crate::parse::pretty(b));
                checks.extend(quote_spanned!(s.span=>
                    #k::distinct(&#rb, &#ra, #site, #tb, #ta)?;
                ));
            }
        }
        checks
    }

    /// Run-time checks that no copied argument (`x.clone()`, `v[j].clone()`) is, contains or
    /// lies inside a place the statement may change through another argument (`f(x,
    /// x.clone())`, `f(v[i], v[j].clone())` at `i == j`, `f(v, v[0].clone())`): the copy would
    /// no longer equal the place, and what the callee computed from it could not be undone.
    /// `written(j)` is the condition that argument `j` may be written (a constant: the callee's
    /// write table, or `true`), or `None` where it never is. The places are compared by their
    /// steps ([`Self::overlap_condition`]), not by address: a `Vec` place covers only its
    /// header, not the elements a copy of one of them reads. Emitted in checked and unchecked
    /// code alike, as [`Self::alias_check`]; with `compile_time` (the checked forward body
    /// only, so that the error is reported once, not once per generated body), pairs that are
    /// the same storage whatever the indices are also a compile error.
    fn copy_alias_check(
        &self,
        args: &[Operand],
        written: impl Fn(usize) -> Option<TokenStream>,
        compile_time: bool,
        s: &Stmt,
    ) -> TokenStream {
        let k = self.krate;
        let mut checks = quote!();
        for (i, a) in args.iter().enumerate() {
            let Operand::Copy(copy, copied) = a else {
                continue;
            };
            for (j, b) in args.iter().enumerate() {
                let Operand::Place(p) = b else { continue };
                if i == j {
                    continue;
                }
                let (Some(cond), Some(same)) = (written(j), self.overlap_condition(p, copied))
                else {
                    continue;
                };
                let site = self.site(s);
                let (tp, tc) = (crate::parse::pretty(p), crate::parse::pretty(copy));
                if compile_time && same.to_string() == "true" {
                    // The same storage whatever the indices (`f(x, x.clone())`, `f(v,
                    // v[0].clone())`): a compile error at the copy where the callee's write
                    // table says it writes that argument (the run-time check stays).
                    let at = syn::spanned::Spanned::span(copy);
                    let msg = format!(
                        "reversible!: `{tc}` copies what this statement may change through its \
                         argument `{tp}`: the copy would no longer equal it afterwards, so the \
                         statement could not be undone. Write the result into a variable the copy \
                         does not come from (where the callee only reads `{tp}`, pass it as a \
                         copy too)"
                    )
                    // (a format string: the places' text must not be read as arguments)
                    .replace('{', "{{")
                    .replace('}', "}}");
                    checks.extend(quote_spanned!(at=> const { ::core::assert!(!(#cond), #msg) };));
                }
                checks.extend(quote_spanned!(s.span=>
                    #k::not_copied(#cond && #same, #site, #tp, #tc)?;
                ));
            }
        }
        checks
    }

    /// The condition under which places `a` and `b` are the same storage or one lies inside
    /// the other: the same root, and steps that agree as far as the shorter path goes — fields
    /// by name, at compile time, and indices written differently by value, at run time (`v[i]`
    /// and `v[j][0]`: `i == j`; `v` and `v[0]`: always). `None` where they never are.
    fn overlap_condition(&self, a: &Expr, b: &Expr) -> Option<TokenStream> {
        use crate::parse::{place_steps, Step};
        let ((ra, sa), (rb, sb)) = (place_steps(a), place_steps(b));
        if ra != rb {
            return None;
        }
        let mut conds = Vec::new();
        for (x, y) in sa.iter().zip(&sb) {
            match (x, y) {
                (Step::Field(p), Step::Field(q)) if p == q => {}
                (Step::Index(p), Step::Index(q)) => {
                    if p.to_token_stream().to_string() != q.to_token_stream().to_string() {
                        let (p, q) = (self.rw(p), self.rw(q));
                        conds.push(quote!((#p) == (#q)));
                    }
                }
                _ => return None,
            }
        }
        Some(if conds.is_empty() {
            quote!(true)
        } else {
            quote!(#(#conds)&&*)
        })
    }

    /// Checked code: a constant argument computed by `e` (written `text`), passed to a call or a
    /// user's instruction as the copy `n`, must be unchanged after it (the callee's write would
    /// be lost).
    fn constant_check_as(&self, n: &Ident, e: &impl ToTokens, text: &str, s: &Stmt) -> TokenStream {
        let k = self.krate;
        let site = self.site(s);
        quote_spanned!(s.span=>
            if !#k::Ancilla::restored(&#n, &(#e)) {
                return ::core::result::Result::Err(#k::InvertibilityError::constant(
                    #site, #text, ::std::format!("{:?}", #e), ::std::format!("{:?}", #n)));
            }
        )
    }

    fn call(
        &self,
        func: &syn::Path,
        inverse: bool,
        args: &[Operand],
        s: &Stmt,
        checks: bool,
        keep: Keep,
    ) -> TokenStream {
        let span = s.span;
        let places: Vec<&Expr> = args
            .iter()
            .filter_map(|a| {
                if let Operand::Place(p) = a {
                    Some(p)
                } else {
                    None
                }
            })
            .collect();
        // Passed by copy in and out (after the run-time check that it is not the same element
        // as another argument): a place that may be another argument at run time (`v[0]` beside
        // `v[j]`). Places that never are but index into the same collection (the same root and
        // fields up to the first index: `bs[i].vel` and `bs[i].pos`; two `&mut` through
        // `IndexMut` borrow all of `bs` twice, a bare E0499; a new user) agree up to a field
        // after that index, and are borrowed directly through one borrow of what they share
        // (`let e = &mut bs[i]; f(&mut e.vel, &mut e.pos)`), so their type need not be `Copy`
        // (two `Vec` fields of one element were refused once they were copied). `s.0[0]` and
        // `s.1[0]` are two collections: borrowed directly, as before (a hunter).
        let indexes = |p: &Expr| {
            let (root, steps) = crate::parse::place_steps(p);
            let first = steps
                .iter()
                .position(|st| matches!(st, crate::parse::Step::Index(_)))?;
            let fields: Vec<String> = steps[..first]
                .iter()
                .map(|st| match st {
                    crate::parse::Step::Field(f) => f.clone(),
                    crate::parse::Step::Index(_) => unreachable!("before the first index"),
                })
                .collect();
            Some((root, fields))
        };
        let shared = |p: &Expr| {
            places
                .iter()
                .any(|q| !std::ptr::eq(*q, p) && may_alias(p, q))
        };
        // The places borrowed through a shared borrow, by collection, in argument order.
        let mut groups: Vec<(_, Vec<usize>)> = Vec::new();
        for (j, a) in args.iter().enumerate() {
            let Operand::Place(p) = a else { continue };
            let Some(key) = indexes(p).filter(|_| !shared(p)) else {
                continue;
            };
            match groups.iter_mut().find(|(k, _)| *k == key) {
                Some((_, members)) => members.push(j),
                None => groups.push((key, vec![j])),
            }
        }
        let mut pre = self.alias_check(None, &args.iter().collect::<Vec<_>>(), s);
        let mut table = func.clone();
        if let Some(last) = table.segments.last_mut() {
            last.arguments = syn::PathArguments::None;
        }
        let writes = writes_const(WRITE_LEVELS - 1);
        pre.extend(self.copy_alias_check(
            args,
            |j| Some(quote!(#table::#writes[#j])),
            !inverse && checks,
            s,
        ));
        // What runs after the call: first every write-back of a place copied in and out
        // (`post`), then the checks of constant arguments and the copies' gradients given back
        // (`after`). In argument order, `f(v[1].clone(), v[0], v[1])` gave the copy's gradient to
        // `v[1]`, and the write-back `v[1] = …` replaced it (a hunter: the gradient of
        // `v[0] + v[1]²` was [1, 1.5], not [1, 3]); the checks see the places as the call left
        // them, as those of places passed directly do.
        let mut post = quote!();
        let mut after = quote!();
        // (after every copy-in and hoisted index: nothing reads the collection inside the
        // borrow)
        let mut borrows = quote!();
        let mut split: Vec<Option<TokenStream>> = vec![None; args.len()];
        for (_, members) in groups.iter().filter(|(_, m)| m.len() > 1) {
            let members: Vec<(usize, Expr, Vec<crate::parse::Seg>)> = members
                .iter()
                .map(|&j| {
                    let Operand::Place(p) = &args[j] else {
                        unreachable!("grouped arguments are places")
                    };
                    (j, self.rw(p), crate::parse::place_path(p).1)
                })
                .collect();
            let members: Vec<_> = members.iter().collect();
            self.split_borrow(&members, 0, None, &mut pre, &mut borrows, &mut split, span);
        }
        let mut passed = Vec::new();
        for (j, a) in args.iter().enumerate() {
            match a {
                Operand::Place(_) if split[j].is_some() => {
                    passed.extend(split[j].take());
                }
                Operand::Place(p) if !shared(p) => {
                    let p = self.hoist_indices(self.rw(p), &mut pre, span);
                    passed.push(quote_spanned!(span=> &mut #p));
                }
                Operand::Place(p) => {
                    // (copied in and out after the run-time check that it is not the same
                    // element as another argument: `SharedArg` says so where it is not `Copy`)
                    let n = self.tmp();
                    let at = syn::spanned::Spanned::span(p);
                    let k = respan(self.krate, at);
                    let p = self.hoist_indices(self.rw(p), &mut pre, span);
                    pre.extend(quote_spanned!(at=> let mut #n = #k::shared_arg(&#p);));
                    post.extend(quote_spanned!(span=> #p = #n;));
                    passed.push(quote!(&mut #n));
                }
                Operand::Lit(e) => {
                    // Typed by the parameter it is passed to.
                    let n = self.tmp();
                    let at = syn::spanned::Spanned::span(e);
                    let ka = respan(self.krate, at);
                    let l = match Literal::parse(e) {
                        Ok(l) => l.tokens(&ka, at),
                        Err(err) => err.to_compile_error(),
                    };
                    pre.extend(quote_spanned!(span=> let mut #n = #l;));
                    if checks {
                        let typed = quote_spanned!(span=> #ka::like(&#n, #l));
                        after.extend(self.constant_check_as(
                            &n,
                            &typed,
                            &crate::parse::pretty(e),
                            s,
                        ));
                    }
                    passed.push(quote!(&mut #n));
                }
                Operand::Const(e) | Operand::Computed(e) => {
                    let n = self.tmp();
                    let text = crate::parse::pretty(e);
                    let e = match a {
                        Operand::Computed(_) => self.computed_arg(e),
                        _ => self.rw(e).to_token_stream(),
                    };
                    pre.extend(quote_spanned!(span=> let mut #n = #e;));
                    if checks {
                        after.extend(self.constant_check_as(&n, &e, &text, s));
                    }
                    passed.push(quote!(&mut #n));
                }
                Operand::Copy(e, p) => {
                    // (a copy, as `let c = x; f(c); unlet c = x;` makes it: what flows into it
                    // reaches `x`)
                    let n = self.tmp();
                    let k = self.krate;
                    let text = crate::parse::pretty(e);
                    let e = self.rw(e);
                    pre.extend(quote_spanned!(span=> let mut #n = #k::copy_of(#e);));
                    if checks {
                        after.extend(self.constant_check_as(&n, &e, &text, s));
                    }
                    // (the place the copy was taken from, its indices evaluated with the copy)
                    let p = self.hoist_indices(self.rw(p), &mut pre, span);
                    after.extend(quote_spanned!(span=> #k::Ancilla::give_gradient(&#n, &mut #p);));
                    passed.push(quote!(&mut #n));
                }
            }
        }
        // In a gradient pass, a marked call keeps its callee's routine values, and the mirrored
        // uncall takes them back.
        let keeps = self.keep
            && !checks
            && matches!((inverse, keep), (false, Keep::Push) | (true, Keep::Pop));
        if keeps {
            let kept = kept();
            passed.push(quote!(&mut *#kept));
        }
        // Without checks, the callee runs without checks too (its `_unchecked` twin).
        let callee = match (inverse, checks) {
            (false, true) => func.to_token_stream(),
            _ => {
                // `f::<T>` becomes `f::uncall::<T>` (or `f::call_unchecked::<T>`, …).
                let name = match (inverse, checks) {
                    _ if keeps && inverse => "__uncall_kept",
                    _ if keeps => "__call_keep",
                    (true, true) => "uncall",
                    (true, false) => "uncall_unchecked",
                    _ => "call_unchecked",
                };
                let name = Ident::new(name, span);
                let mut path = func.clone();
                let last = path.segments.last_mut().expect("a path has a segment");
                let generics = std::mem::replace(&mut last.arguments, syn::PathArguments::None);
                quote_spanned!(span=> #path::#name #generics)
            }
        };
        quote_spanned!(span=> { #pre #borrows #callee(#(#passed),*)?; #post #after })
    }

    /// Call arguments `ps` (position, place as [`rw`](Self::rw) gives it, its steps), pairwise
    /// never the same storage (they agree up to a field), that share their first `depth` steps,
    /// reached from `base` (a borrow of those steps; `None`: from the places' roots), passed
    /// through one `&mut` borrow of what they share: `v[i].a`, `v[i].b` as `let e = &mut v[i];`
    /// then `&mut e.a`, `&mut e.b` — each index evaluated once, into `pre` where computed
    /// ([`hoist_indices`](Self::hoist_indices)), the borrows into `borrows`, the arguments into
    /// `passed`.
    #[allow(clippy::too_many_arguments)]
    fn split_borrow(
        &self,
        ps: &[&(usize, Expr, Vec<crate::parse::Seg>)],
        depth: usize,
        base: Option<&Ident>,
        pre: &mut TokenStream,
        borrows: &mut TokenStream,
        passed: &mut [Option<TokenStream>],
        span: Span,
    ) {
        use crate::parse::{place_prefix, rebase};
        // The place `e` (of `len` steps) up to its step `n`, from `base`.
        let upto = |e: &Expr, len: usize, n: usize| {
            let prefix = place_prefix(e, len - n);
            match base {
                Some(b) => rebase(&prefix, n - depth, &syn::parse_quote!(#b)),
                None => prefix,
            }
        };
        let direct = |(j, e, segs): &(usize, Expr, Vec<crate::parse::Seg>),
                      pre: &mut TokenStream,
                      passed: &mut [Option<TokenStream>]| {
            let p = self.hoist_indices(upto(e, segs.len(), segs.len()), pre, span);
            passed[*j] = Some(quote_spanned!(span=> &mut #p));
        };
        if let [one] = ps {
            return direct(one, pre, passed);
        }
        let first = &ps[0].2;
        let common = (depth..first.len())
            .take_while(|&d| ps.iter().all(|(_, _, s)| s.get(d) == Some(&first[d])))
            .count();
        let mut t = base.cloned();
        if common > 0 {
            let n = self.tmp();
            let (_, e, segs) = ps[0];
            let p = self.hoist_indices(upto(e, segs.len(), depth + common), pre, span);
            borrows.extend(quote_spanned!(span=> let #n = &mut #p;));
            t = Some(n);
        }
        let depth = depth + common;
        // by the step after the shared ones (a field: the places never are the same storage)
        let mut next: Vec<Vec<&(usize, Expr, Vec<crate::parse::Seg>)>> = Vec::new();
        for p in ps {
            match next
                .iter_mut()
                .find(|g| g[0].2.get(depth) == p.2.get(depth))
            {
                Some(g) => g.push(p),
                None => next.push(vec![p]),
            }
        }
        if next.len() == 1 {
            // (places that share every step: none here, as they would be the same storage)
            for p in ps {
                direct(p, pre, passed);
            }
            return;
        }
        for g in next {
            self.split_borrow(&g, depth, t.as_ref(), pre, borrows, passed, span);
        }
    }
}

/// The name of the stack parameter of the keeping twins and of a gradient pass's local:
/// hygienic, so that no user's parameter or variable can collide with it.
pub(crate) fn kept() -> Ident {
    Ident::new("__rev_kept", Span::mixed_site())
}

/// When unchecked forward code may skip uncomputing `routine`: the routine runs no `@safe` code
/// and writes only its own ancillas (a call counts as writing the arguments its callee's
/// `__WRITES3` marks, [`written_params`]), and the ancillas it leaves allocated carry no
/// gradient (`Ancilla::no_gradient`: passive types always, a `GVar` whose gradient is exactly
/// zero; then every instruction of the uncomputation writes a zero-gradient ancilla and moves
/// no gradient). Then the uncomputation only restores ancillas that are dropped right after,
/// unchecked. (Forward instructions pass a target's gradient on towards their operands and skip
/// their partials when it is zero; ancillas of nested scopes and of callees start with zero
/// gradient; so no gradient moves.) Returns `None` when it may never be skipped.
///
/// In an inverse (`backwards`) only passive ancillas count (plain numbers: a constant test):
/// there the ancillas of a `GVar` program have nearly always received a gradient by the end, and
/// testing them cost the reversible BA gradient 7 %.
fn skip_condition(
    routine: &[Stmt],
    params: &[String],
    krate: &TokenStream,
    backwards: bool,
) -> Option<TokenStream> {
    let (mut conds, top) = writes_only_ancillas(routine, params)?;
    // (the ancillas as written: a raw identifier (`r#ref`) is no name for `Ident::new`)
    let test = if backwards {
        quote!(passive)
    } else {
        quote!(no_gradient)
    };
    conds.extend(top.iter().map(|id| quote!(#krate::#test(&#id))));
    if conds.is_empty() {
        return Some(quote!(true));
    }
    Some(quote!(#(#conds)&&*))
}

/// Whether `routine` writes only its own ancillas: `None` when it runs `@safe` code, writes a
/// parameter or shadows a name; otherwise the conditions (constants: `!g::__WRITES3[j]`) under
/// which its calls write no non-ancilla either, and its top-level ancillas.
fn writes_only_ancillas(
    routine: &[Stmt],
    params: &[String],
) -> Option<(Vec<TokenStream>, Vec<Ident>)> {
    use crate::parse::place_path;
    // The routine's ancillas: `top` (allocated at its top level), `inner` (in nested blocks),
    // and its loops' variables (`vars`): not locals a write may go to (a loop variable is never
    // written; a name it shadows is written outside the loop), only names to see shadowing by.
    fn names(
        stmts: &[Stmt],
        nested: bool,
        top: &mut Vec<Ident>,
        inner: &mut Vec<String>,
        vars: &mut Vec<String>,
    ) {
        for s in stmts {
            match &s.kind {
                Kind::Let { name, .. } => {
                    if nested {
                        inner.push(name.to_string())
                    } else {
                        top.push(name.clone())
                    }
                }
                Kind::Block(b) | Kind::NoCheck(b) | Kind::Uncompute(b, _) | Kind::Recompute(b) => {
                    names(b, nested, top, inner, vars)
                }
                Kind::If { then, els, .. } => {
                    names(then, true, top, inner, vars);
                    names(els, true, top, inner, vars);
                }
                Kind::While { body, .. } => names(body, true, top, inner, vars),
                Kind::For { var, body, .. } => {
                    vars.push(var.to_string());
                    names(body, true, top, inner, vars);
                }
                _ => {}
            }
        }
    }
    // `conds`: for a call that gets a non-ancilla, that the callee writes none of those
    // arguments (its `__WRITES3`, a constant: the test folds away)
    fn only_local(
        stmts: &[Stmt],
        local: &dyn Fn(&Expr) -> bool,
        conds: &mut Vec<TokenStream>,
    ) -> bool {
        stmts.iter().all(|s| match &s.kind {
            Kind::Acc { target, .. } | Kind::Xor { target, .. } | Kind::Scale { target, .. } => {
                local(target)
            }
            Kind::Instr { args, .. } => args.iter().all(|a| match a {
                Operand::Place(p) => local(p),
                _ => true,
            }),
            Kind::Call { func, args, .. } => {
                let mut path = func.clone();
                if let Some(last) = path.segments.last_mut() {
                    last.arguments = syn::PathArguments::None;
                }
                for (j, a) in args.iter().enumerate() {
                    if let Operand::Place(p) = a {
                        if !local(p) {
                            let c = writes_const(WRITE_LEVELS - 1);
                            conds.push(quote!(!#path::#c[#j]));
                        }
                    }
                }
                true
            }
            Kind::Safe(_) => false,
            Kind::Let { .. } => true,
            // (deallocating an ancilla allocated before the routine writes it too: the
            // uncomputation allocates it again, and gives its gradient a second time where it
            // is left out; a reviewer: the gradient of `x²` came out `4x`)
            Kind::Unlet { name, .. } => local(&syn::parse_quote!(#name)),
            Kind::If { then, els, .. } => {
                only_local(then, local, conds) && only_local(els, local, conds)
            }
            Kind::While { body, .. } | Kind::For { body, .. } => only_local(body, local, conds),
            Kind::Block(b) | Kind::NoCheck(b) | Kind::Uncompute(b, _) | Kind::Recompute(b) => {
                only_local(b, local, conds)
            }
            Kind::Routine(..) | Kind::Unroutine(_) | Kind::Inverse(_) => false,
        })
    }
    let (mut top, mut inner, mut vars) = (Vec::new(), Vec::new(), Vec::new());
    names(routine, false, &mut top, &mut inner, &mut vars);
    let top_names: Vec<String> = top.iter().map(Ident::to_string).collect();
    if inner
        .iter()
        .chain(&vars)
        .any(|n| top_names.contains(n) || params.contains(n))
        || vars.iter().any(|n| inner.contains(n))
        || top_names.iter().any(|n| params.contains(n))
    {
        return None; // shadowing: do not try to be clever
    }
    let local = |e: &Expr| {
        let r = place_path(e).0;
        top_names.contains(&r) || inner.contains(&r)
    };
    let mut conds = Vec::new();
    if !only_local(routine, &local, &mut conds) {
        return None;
    }
    Some((conds, top))
}

/// When a gradient pass may leave out a body's final uncomputation of `routine` (and its
/// inverse's leading recomputation): the routine writes only its own ancillas, so the
/// parameters `seed` sees are those the whole function leaves. The condition (constants for
/// its calls, as in [`keep_plan`]); `None` when it never may (a parameter written, `@safe`
/// code, shadowing): the pass then runs the function, `seed` and the inverse in turn.
pub(crate) fn fusable(routine: &[Stmt], params: &[String]) -> Option<TokenStream> {
    let (conds, _) = writes_only_ancillas(routine, params)?;
    Some(if conds.is_empty() {
        quote!(true)
    } else {
        quote!(#(#conds)&&*)
    })
}

/// A body marked for a gradient pass's forward half: its forward calls keep their callees'
/// routine values ([`Keep::Push`]); in the inverse of a marked body ([`invert`] swaps push and
/// pop) their mirror images take them back ([`Keep::Pop`]), in last-in, first-out order.
/// Uncalls written as such (`~g(…)`) keep nothing, nor do an uncomputation's uncalls and its
/// inverse, the recomputation (`Kind::Uncompute` keeps its routine unmarked): what the routine's
/// calls kept (the routine as first computed, a `Kind::Recompute`, is marked) stays on the stack
/// until their mirror images in the inverse half take it back.
/// So values are kept in forward halves only, where every gradient is zero.
pub(crate) fn mark(stmts: &[Stmt]) -> Vec<Stmt> {
    stmts
        .iter()
        .map(|s| {
            let kind = match &s.kind {
                Kind::Call {
                    func,
                    inverse: false,
                    args,
                    ..
                } => Kind::Call {
                    func: func.clone(),
                    inverse: false,
                    args: args.clone(),
                    keep: Keep::Push,
                },
                // A routine as first computed (`@routine`, lowered to a recomputation): its
                // calls keep, and the inverse's uncomputation of it takes back.
                Kind::Recompute(routine) => Kind::Recompute(mark(routine)),
                // Uncomputations (their routines unmarked): as they are.
                k => k.map_bodies(&mut |b| mark(b)),
            };
            Stmt {
                kind,
                text: s.text.clone(),
                span: s.span,
                inverted: s.inverted,
            }
        })
        .collect()
}

/// How a gradient pass may keep a routine's values instead of uncomputing it and recomputing it
/// in the inverse: when the routine writes only its own ancillas (constants `!g::__WRITES3[j]`
/// for its calls, returned as one condition), the ancillas it leaves allocated, in the order
/// they were allocated. `None` when it may not (`@safe` code, a written parameter, shadowing,
/// an ancilla allocated twice).
pub(crate) fn keep_plan(routine: &[Stmt], params: &[String]) -> Option<(TokenStream, Vec<Ident>)> {
    fn walk(stmts: &[Stmt], live: &mut Vec<Ident>, ok: &mut bool) {
        for s in stmts {
            match &s.kind {
                Kind::Let { name, .. } => {
                    if live.contains(name) {
                        *ok = false;
                    }
                    live.push(name.clone());
                }
                Kind::Unlet { name, .. } => live.retain(|n| n != name),
                Kind::Block(b) | Kind::NoCheck(b) | Kind::Uncompute(b, _) | Kind::Recompute(b) => {
                    walk(b, live, ok)
                }
                _ => {}
            }
        }
    }
    let (conds, _) = writes_only_ancillas(routine, params)?;
    let (mut live, mut ok) = (Vec::new(), true);
    walk(routine, &mut live, &mut ok);
    if !ok {
        return None;
    }
    let cond = if conds.is_empty() {
        quote!(true)
    } else {
        quote!(#(#conds)&&*)
    };
    Some((cond, live))
}

/// How many levels of [`written_params`] a function has: `__WRITES` (level 0) to `__WRITES3`.
pub(crate) const WRITE_LEVELS: usize = 4;

/// The name of a function's level-`l` write constant (`__WRITES`, `__WRITES1`, …).
pub(crate) fn writes_const(l: usize) -> Ident {
    if l == 0 {
        format_ident!("__WRITES")
    } else {
        format_ident!("__WRITES{}", l)
    }
}

/// Which parameters a function body may write, at each of [`WRITE_LEVELS`] levels: targets of
/// instructions and places passed to instructions always, every parameter when it runs `@safe`
/// code; a place passed to a call at level 0 whatever the callee does with it, at level `l`
/// when the callee's level `l − 1` says it may write it. Level `l` reads only the callees'
/// level `l − 1`, so recursion makes no cycle of constants, and a call chain of up to
/// `WRITE_LEVELS − 1` calls is seen through (`i_var` → `i_mean` → `i_sum`, which only reads its
/// input). The macro emits level `l` as the function's [`writes_const`]`(l)`; level 0 as
/// booleans, the others as constant expressions.
pub(crate) fn written_params(stmts: &[Stmt], params: &[String]) -> Vec<Vec<TokenStream>> {
    enum Write<'a> {
        Direct(&'a Expr),
        All,
        Call(&'a syn::Path, usize, &'a Expr),
    }
    fn walk<'a>(stmts: &'a [Stmt], mark: &mut dyn FnMut(Write<'a>)) {
        for s in stmts {
            match &s.kind {
                Kind::Acc { target, .. }
                | Kind::Xor { target, .. }
                | Kind::Scale { target, .. } => mark(Write::Direct(target)),
                Kind::Instr { args, .. } => {
                    for a in args {
                        if let Operand::Place(p) = a {
                            mark(Write::Direct(p));
                        }
                    }
                }
                Kind::Call { func, args, .. } => {
                    for (i, a) in args.iter().enumerate() {
                        if let Operand::Place(p) = a {
                            mark(Write::Call(func, i, p));
                        }
                    }
                }
                Kind::Safe(_) => mark(Write::All),
                Kind::Let { .. } | Kind::Unlet { .. } => {}
                Kind::If { then, els, .. } => {
                    walk(then, mark);
                    walk(els, mark);
                }
                Kind::While { body, .. } | Kind::For { body, .. } => walk(body, mark),
                Kind::Block(b)
                | Kind::NoCheck(b)
                | Kind::Routine(_, b)
                | Kind::Inverse(b)
                | Kind::Recompute(b) => walk(b, mark),
                Kind::Uncompute(inv, routine) => {
                    walk(inv, mark);
                    walk(routine, mark);
                }
                Kind::Unroutine(_) => {}
            }
        }
    }
    let n = params.len();
    let mut direct = vec![false; n];
    // per parameter: the (callee without generics, argument index) it is passed to
    let mut calls: Vec<Vec<(syn::Path, usize)>> = vec![Vec::new(); n];
    let param = |e: &Expr| {
        let root = crate::parse::place_path(e).0;
        params.iter().position(|p| *p == root)
    };
    walk(stmts, &mut |w| match w {
        Write::All => direct.fill(true),
        Write::Direct(e) => {
            if let Some(k) = param(e) {
                direct[k] = true;
            }
        }
        Write::Call(func, i, e) => {
            if let Some(k) = param(e) {
                let mut path = func.clone();
                if let Some(last) = path.segments.last_mut() {
                    last.arguments = syn::PathArguments::None;
                }
                let key = (path.to_token_stream().to_string(), i);
                if !calls[k]
                    .iter()
                    .any(|(p, j)| (p.to_token_stream().to_string(), *j) == key)
                {
                    calls[k].push((path, i));
                }
            }
        }
    });
    (0..WRITE_LEVELS)
        .map(|l| {
            (0..n)
                .map(|k| {
                    if direct[k] || (l == 0 && !calls[k].is_empty()) {
                        quote!(true)
                    } else if calls[k].is_empty() {
                        quote!(false)
                    } else {
                        let c = writes_const(l - 1);
                        let refs = calls[k].iter().map(|(path, i)| quote!(#path::#c[#i]));
                        quote!((#(#refs)||*))
                    }
                })
                .collect()
        })
        .collect()
}

/// The operands of an instruction's right-hand side, in order.
fn rhs_operands(rhs: &Rhs) -> Vec<&Operand> {
    match rhs {
        Rhs::Id(a) | Rhs::Op1(_, a) | Rhs::Powi(_, a) => vec![a],
        Rhs::Arith(_, a, b) | Rhs::Op2(_, a, b) => vec![a, b],
    }
}

fn respan(ts: &TokenStream, span: Span) -> TokenStream {
    ts.clone()
        .into_iter()
        .map(|mut tt| {
            tt.set_span(span);
            tt
        })
        .collect()
}

/// Rewrites `p` to `(*p)` for every parameter `p`, including inside macro calls (`@safe println!`).
/// Rewrites `a ⋈ 1.5` (and `1.5 ⋈ a`, `a ⋈ -1.5`) to compare `RevReal::value(&a)` with the
/// literal.
struct LiteralComparisons<'a> {
    krate: &'a TokenStream,
}

/// Whether `e` is an unsuffixed float literal, possibly negated or parenthesised.
fn is_float_literal(e: &Expr) -> bool {
    match e {
        Expr::Lit(l) => matches!(&l.lit, syn::Lit::Float(f) if f.suffix().is_empty()),
        Expr::Unary(u) if matches!(u.op, syn::UnOp::Neg(_)) => is_float_literal(&u.expr),
        Expr::Paren(p) => is_float_literal(&p.expr),
        _ => false,
    }
}

/// The value of an unsuffixed integer literal, possibly negated or parenthesised.
fn int_literal(e: &Expr) -> Option<i128> {
    match e {
        Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Int(i),
            ..
        }) if i.suffix().is_empty() => i.base10_parse::<i128>().ok(),
        Expr::Unary(u) if matches!(u.op, syn::UnOp::Neg(_)) => int_literal(&u.expr).map(|v| -v),
        Expr::Paren(p) => int_literal(&p.expr),
        _ => None,
    }
}

impl VisitMut for LiteralComparisons<'_> {
    fn visit_expr_mut(&mut self, e: &mut Expr) {
        syn::visit_mut::visit_expr_mut(self, e);
        let Expr::Binary(b) = e else { return };
        use syn::BinOp::*;
        if !matches!(b.op, Lt(_) | Le(_) | Gt(_) | Ge(_) | Eq(_) | Ne(_)) {
            return;
        }
        let k = self.krate;
        // An integer literal against a value: `RevReal`s compare their primal with it as `f64`,
        // integers in their own type (`if (x > 0, ~)` for `T: RevReal`, `n == 1` for `usize`).
        let (lit, other, lit_left) = match (int_literal(&b.left), int_literal(&b.right)) {
            (None, Some(_)) => (Some((*b.right).clone()), (*b.left).clone(), false),
            (Some(_), None) => (Some((*b.left).clone()), (*b.right).clone(), true),
            _ => (None, (*b.left).clone(), false),
        };
        if let Some(lit) = lit {
            let span = syn::spanned::Spanned::span(&other);
            // (the literal typed by the comparison: `f64` for a `RevReal`, else the value's type,
            // exactly, as in `y += x * 3`)
            let at = syn::spanned::Spanned::span(&lit);
            let l = match Literal::parse(&lit) {
                Ok(l) => l.tokens(&respan(k, at), at),
                Err(e) => e.to_compile_error(),
            };
            let op = b.op;
            // (the names spanned as where they are bound: a condition from a `macro_rules!`
            // fragment has that fragment's hygiene, and `call_site` names would not see them)
            let cmp = if lit_left {
                quote_spanned!(span=> __rev_r #op __rev_v)
            } else {
                quote_spanned!(span=> __rev_v #op __rev_r)
            };
            *e = syn::parse_quote_spanned!(span=> {
                #[allow(unused_imports)]
                use #k::{CmpLitOther as _, CmpLitReal as _};
                let (__rev_v, __rev_r) = (&#k::CmpLit(&(#other))).pair(#l);
                #cmp
            });
            return;
        }
        let wrap = |x: &Expr| -> Expr {
            let span = syn::spanned::Spanned::span(x);
            syn::parse_quote_spanned!(span=> #k::RevReal::value(&(#x)))
        };
        match (is_float_literal(&b.left), is_float_literal(&b.right)) {
            (false, true) => *b.left = wrap(&b.left),
            (true, false) => *b.right = wrap(&b.right),
            _ => {}
        }
    }
}

struct Deref<'a> {
    params: &'a [String],
}

impl VisitMut for Deref<'_> {
    fn visit_expr_mut(&mut self, e: &mut Expr) {
        if let Expr::Path(p) = e {
            if let Some(id) = p.path.get_ident() {
                if self.params.contains(&id.to_string()) {
                    let id = id.clone();
                    *e = syn::parse_quote_spanned!(id.span()=> (*#id));
                    return;
                }
            }
        }
        syn::visit_mut::visit_expr_mut(self, e);
    }

    fn visit_macro_mut(&mut self, m: &mut syn::Macro) {
        m.tokens = deref_tokens(m.tokens.clone(), self.params);
    }
}

fn deref_tokens(ts: TokenStream, params: &[String]) -> TokenStream {
    let mut out = Vec::new();
    let mut after_dot = false;
    for tt in ts {
        let next_after_dot = matches!(&tt, TokenTree::Punct(p) if p.as_char() == '.');
        match tt {
            TokenTree::Ident(id) if !after_dot && params.contains(&id.to_string()) => {
                let span = id.span();
                let mut g = Group::new(Delimiter::Parenthesis, quote_spanned!(span=> *#id));
                g.set_span(span);
                out.push(TokenTree::Group(g));
            }
            TokenTree::Group(g) => {
                let mut n = Group::new(g.delimiter(), deref_tokens(g.stream(), params));
                n.set_span(g.span());
                out.push(TokenTree::Group(n));
            }
            other => out.push(other),
        }
        after_dot = next_after_dot;
    }
    out.into_iter().collect()
}
