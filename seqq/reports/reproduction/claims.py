"""The paper's claims beside what seqq measured, one function per experiment: a panel in, a
Markdown table out (the claim, what the paper says, what this panel's numbers say). Beyond
Fig. 3, each experiment's claims are `Check`s that also say whether they hold, and the summary
table's verdict is judged from them (`judge`)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from seqq.reports.reproduction.markdown import fmt
from seqq.reports.reproduction.panels import PAPER_METHODS, SETTER, ModelRun
from seqq.reports.reproduction.stats import (
    FIG3_LEVEL,
    above_truth,
    alpha_of,
    beam_growth,
    decade_ratios,
    entropy_fits,
    intervals,
    iqr,
    log_ratios,
    pivot,
    share_means,
    spread_ks,
    summary,
)
from seqq.reports.tables import to_markdown, unaccounted_summary


def fig3(run: ModelRun) -> str:
    """Fig. 3's claims (§5 and its caption) beside the panel's medians: the hybrid (the budget
    setter) against importance sampling and beam search."""
    s = summary(run)
    hybrid, importance, beam = s[SETTER], s["importance"], s["beam"]
    best = s[list(PAPER_METHODS)].idxmin(axis=1)
    not_best = [f"K = {k} ({m})" for k, m in zip(s.K, best, strict=True) if m != SETTER]
    ratio_is = (importance / hybrid).replace([np.inf], np.nan)
    ratio_beam = (beam / hybrid).replace([np.inf], np.nan)
    first, last, mid = s.iloc[0], s.iloc[-1], s.iloc[len(s) // 2]
    half = s[beam > 0.5].K
    apart = s[(s[f"{SETTER}_high"] < s.importance_low)
              | (s.importance_high < s[f"{SETTER}_low"])].K
    exact = s[s.truth == "exact"]
    rows = [
        ("the hybrid has the lowest median RAE", "at every K, on all 4 datasets",
         f"at {int((best == SETTER).sum())} of {len(s)} K"
         + (f"; not at {', '.join(not_best)}" if not_best else "")),
        ("the hybrid beats importance sampling", "at every K, on all 4 datasets",
         f"at {int((hybrid < importance).sum())} of {len(s)} K; the two medians' 95% "
         "intervals are apart at " + (f"K = {', '.join(map(str, apart))}" if len(apart)
                                      else "no K")),
        ("median RAE grows with K", "on all 4 datasets",
         f"K = {int(first.K)} → {int(last.K)}: "
         + ", ".join(f"{m} {fmt(first[m])} → {fmt(last[m])}" for m in PAPER_METHODS)),
        ("beam search degrades faster, non-linearly in K", "on 3 of the 4 datasets",
         f"beam {fmt(first.beam)} (K = {int(first.K)}), {fmt(mid.beam)} (K = {int(mid.K)}), "
         f"{fmt(last.beam)} (K = {int(last.K)})"
         + (f"; above 0.5 from K = {int(half.min())}" if len(half) else "")
         + " (a lower bound: its RAE is at most 1, so the curve flattens near 1)"),
        ("gap importance / hybrid", "not stated (Fig. 3 is a plot)",
         f"ratio of medians {ratio_is.min():.2f}–{ratio_is.max():.2f} over K "
         f"(median {ratio_is.median():.2f})"),
        ("gap beam / hybrid", "not stated (Fig. 3 is a plot)",
         f"{ratio_beam.iloc[0]:.1f}× at K = {int(first.K)}, {ratio_beam.iloc[-1]:.1f}× at "
         f"K = {int(last.K)}"),
    ]
    if len(exact):
        rows.append(("the hybrid's median RAE where the truth is exact", "not stated",
                     ", ".join(f"{fmt(h)} (K = {int(k)})"
                               for k, h in zip(exact.K, exact[SETTER], strict=True))))
    return ("The paper's Fig. 3 claims beside seqq's medians:\n\n"
            + to_markdown(pd.DataFrame(rows, columns=["Fig. 3 claim", "the paper (§5, caption)",
                                                      "seqq, these N histories"])))


# ---- the other experiments: each claim checked, `holds` judged, the verdict from all of them

YES, MOSTLY, NO, UNKNOWN = "yes", "mostly", "no", "–"  # UNKNOWN: these results cannot tell yet


@dataclass(frozen=True)
class Check:
    """One of the paper's claims beside seqq's numbers, and whether they bear it out."""

    claim: str
    paper: str
    seqq: str
    holds: str  # YES, MOSTLY (in at least 3 of 4 cases), NO or UNKNOWN


Checks = Callable[[ModelRun], list[Check]]


def share(hits: int, of: int) -> str:
    """YES when every case agrees, MOSTLY when at least 3 of 4 do, else NO; UNKNOWN of none."""
    if of == 0:
        return UNKNOWN
    return YES if hits == of else MOSTLY if hits >= 0.75 * of else NO


def table(checks: Checks, title: str) -> Callable[[ModelRun], str]:
    """A panel's checks as the doc's claims table, `title` naming the paper's figure."""
    def claims(run: ModelRun) -> str:
        rows = [(c.claim, c.paper, c.seqq, c.holds) for c in checks(run)]
        return (f"The paper's {title} claims beside seqq's numbers:\n\n"
                + to_markdown(pd.DataFrame(rows, columns=[f"{title} claim", "the paper",
                                                          "seqq, these N histories",
                                                          "holds"])))
    return claims


def verdict(checks: Checks) -> Callable[[Sequence[ModelRun]], str]:
    """The summary table's verdict from every panel's checks (`judge`)."""
    return lambda runs: judge([(run.dataset, c) for run in runs for c in checks(run)])


def judge(found: Sequence[tuple[str, Check]]) -> str:
    """reproduced (every claim holds, at least mostly), partly (some do not), differs (none
    does), not decided yet (those that can be told hold, others cannot be told yet) or not
    checkable yet (none can), naming the claims that do not hold, hold only mostly, or cannot be
    told yet, with their datasets."""
    def named(status: str) -> str:
        where: dict[str, list[str]] = {}
        for dataset, check in found:
            if check.holds == status:
                where.setdefault(check.claim, []).append(dataset)
        return "; ".join(f"{claim} ({', '.join(d)})" for claim, d in where.items())

    told = [c for _, c in found if c.holds != UNKNOWN]
    failing = [c for c in told if c.holds == NO]
    if not told:
        word = "not checkable yet"
    elif failing:
        word = "differs" if len(failing) == len(told) else "partly"
    else:  # all that can be told holds; while a claim cannot be told yet, that is not a verdict
        word = "reproduced" if len(told) == len(found) else "not decided yet"
    parts = [(f"not: {named(NO)}" if failing else ""),
             (f"only mostly: {named(MOSTLY)}" if any(c.holds == MOSTLY for c in told) else ""),
             (f"cannot tell yet: {named(UNKNOWN)}" if len(told) < len(found) else "")]
    detail = " · ".join(p for p in parts if p)
    return f"**{word}**" + (f" ({detail})" if detail else "")


def _listed(items: Sequence[str], most: int = 4) -> str:
    return ", ".join(items[:most]) + (f" and {len(items) - most} more" if len(items) > most
                                      else "")


def fig3_checks(run: ModelRun) -> list[Check]:
    """Fig. 3's claims (the table of `fig3`) judged, for the summary's verdict."""
    s = summary(run)
    best = s[list(PAPER_METHODS)].idxmin(axis=1)
    first, last = s.iloc[0], s.iloc[-1]
    faster = (last.beam - first.beam > last[SETTER] - first[SETTER]
              and last.beam / last[SETTER] > first.beam / first[SETTER])
    return [
        Check("the hybrid has the lowest median RAE", "", "", share((best == SETTER).sum(), len(s))),
        Check("the hybrid beats importance sampling", "", "",
              share((s[SETTER] < s.importance).sum(), len(s))),
        Check("median RAE grows with K", "", "",
              YES if all(last[m] > first[m] for m in PAPER_METHODS) else NO),
        Check("beam search degrades faster", "", "", YES if faster else NO),
    ]


def lowest(rows: pd.DataFrame, index: Sequence[str], stat: str, claim: str,
           paper: str) -> Check:
    """"The hybrid has the lowest `stat` RAE" per cell of `index`: where it is not, whether
    another method is lower beyond noise (the two 95% intervals apart) or within it (a tie)."""
    cells = intervals(rows, index, stat)
    best = cells["value"].unstack("method").idxmin(axis=1)
    names = ["S" if c == "budget_level" else c for c in index]
    missed, beaten = [], []
    for key, method in best.items():
        if method == SETTER:
            continue
        key = key if isinstance(key, tuple) else (key,)
        where = ", ".join(f"{n} = {v}" for n, v in zip(names, key, strict=True))
        missed.append(f"{where} ({method})")
        if cells.loc[(*key, SETTER), "low"] > cells.loc[(*key, method), "high"]:
            beaten.append(f"{where} ({method})")
    said = f"at {len(best) - len(missed)} of {len(best)} cells"
    if missed:
        said += (f"; elsewhere lower within the noise (95% intervals overlap) at "
                 f"{len(missed) - len(beaten)}, beyond it at {len(beaten)}"
                 + (f": {_listed(beaten)}" if beaten else f" (not lowest: {_listed(missed)})"))
    return Check(claim, paper, said, YES if not missed else MOSTLY if not beaten else NO)


def fig5(run: ModelRun) -> list[Check]:
    """Figs 5 and 6: the hybrid lowest at every K and budget, errors falling with S and growing
    with K."""
    median = pivot(run.rows, ["budget_level", "K"])
    levels = run.levels
    ks = sorted(run.rows.K.unique())
    paper = "hybrid best: 4 datasets × 3 methods × S = 10, 100, 1000 (§5, App. G)"
    checks = [lowest(run.rows, ["budget_level", "K"], stat,
                     f"the hybrid has the lowest {stat} RAE ({name})", paper)
              for stat, name in (("median", "Fig. 5"), ("mean", "Fig. 6"))]
    falls = [(m, k) for m in median.columns for k in ks
             if np.all(np.diff(median.xs(k, level="K")[m].reindex(levels).to_numpy()) < 0)]
    hybrid = median[SETTER].unstack("budget_level")
    checks.append(Check(
        "median RAE falls as the budget S grows", "implied by Figs 5, 6 and 10, 11",
        f"at every larger S for {len(falls)} of {len(median.columns) * len(ks)} (method, K); "
        f"hybrid at K = {ks[-1]}: " + " → ".join(fmt(hybrid.loc[ks[-1], s]) for s in levels)
        + f" (S = {' → '.join(map(str, levels))})",
        share(len(falls), len(median.columns) * len(ks))))
    grows = [(m, s) for m in median.columns for s in levels
             if median.loc[(s, ks[-1]), m] > median.loc[(s, ks[0]), m]]
    checks.append(Check(
        "median RAE grows with K at every budget", "§5 (Fig. 3), Figs 5, 6",
        f"K = {ks[0]} → {ks[-1]} higher for {len(grows)} of {len(median.columns) * len(levels)} "
        "(method, S)", share(len(grows), len(median.columns) * len(levels))))
    return checks


def fig4a(run: ModelRun) -> list[Check]:
    """Fig. 4a: beam search's error rises with the restricted entropy, importance sampling's
    far less."""
    fits = entropy_fits(run.rows[run.rows.budget_level == FIG3_LEVEL]).set_index("method")
    beam, importance = fits.loc["beam"], fits.loc["importance"]

    def said(f: pd.Series) -> str:
        return (f"Spearman ρ = {f.rho:.2f}, Pearson r = {f.r:.2f}, fit {f.slope:+.3f} RAE per "
                f"nat; median RAE {fmt(f.low)} → {fmt(f.high)} from the lowest to the highest "
                "third of H(q)")

    correlated = YES if beam.rho >= 0.3 else MOSTLY if beam.rho >= 0.1 else NO
    return [
        Check("beam search's RAE correlates with the restricted entropy H(q)",
              "Fig. 4a (linear fits per method)", f"beam: {said(beam)}", correlated),
        Check("…more than importance sampling's", "Fig. 4a: IS vs beam",
              f"importance: {said(importance)}",
              YES if beam.rho > importance.rho and beam.slope > importance.slope else NO),
    ]


def fig7_9(run: ModelRun) -> list[Check]:
    """Figs 7–9: beam search under the truth, more so at larger K; the sampling estimates
    closer to the diagonal as S grows."""
    ks = spread_ks(run)
    rows = run.rows[run.rows.K.isin(ks)]
    beam = rows[rows.method == "beam"]
    over = int(above_truth(beam).sum())
    levels = run.levels
    tighter, said = [], []
    for method in (SETTER, "importance"):
        for k in ks:
            spreads = [iqr(log_ratios(rows[(rows.method == method) & (rows["K"] == k)
                                           & (rows.budget_level == s)])) for s in levels]
            tighter.append(bool(np.all(np.diff(spreads) < 0)))
            if k == ks[len(ks) // 2]:
                said.append(f"{method} at K = {k}: " + " → ".join(f"{x:.2f}" for x in spreads))
    ratio = beam.assign(r=beam.estimate / beam.truth).groupby(["budget_level", "K"]).r.median()
    falls = [s for s in levels if ratio[s].iloc[-1] < ratio[s].iloc[0]]
    return [
        Check("beam search never overestimates: its points lie on or under the diagonal",
              "beam search's sum is a lower bound (§4)",
              f"{over} of {len(beam):,} beam estimates above the truth by more than 3 of the "
              "truth's standard errors", YES if over == 0 else MOSTLY if over <= 0.01 * len(beam)
              else NO),
        Check("the sampling estimates close in on the diagonal as S grows (Fig. 7 → 9)",
              "the figures (no values in the text)",
              f"spread (IQR of log10 p̂/p) narrower at every larger S for {sum(tighter)} of "
              f"{len(tighter)} (method, K); " + "; ".join(said)
              + f" (S = {' → '.join(map(str, levels))})", share(sum(tighter), len(tighter))),
        Check("beam search falls further under the truth as K grows",
              "the figures; §5 (Fig. 3)",
              "median p̂/p of beam search, K = " + f"{ks[0]} → {ks[-1]}: "
              + ", ".join(f"{ratio[s].iloc[0]:.2f} → {ratio[s].iloc[-1]:.2f} (S = {s})"
                          for s in levels), share(len(falls), len(levels))),
    ]


def fig10(run: ModelRun) -> list[Check]:
    """Figs 10 and 11: 10× the budget, about √10 ≈ 3.16× lower RAE for IS and the hybrid;
    naive MC at RAE 1; uniform MC erratic, often no better than naive."""
    median = pivot(run.rows, ["K", "budget_level"])
    mean = pivot(run.rows, ["K", "budget_level"], "mean")
    ks = sorted(run.rows.K.unique())
    checks = []
    ratios, said = [], []
    for method in ("importance", SETTER):
        if method not in median.columns:
            continue
        per = pd.concat([decade_ratios(median.loc[k][method]) for k in ks])
        ratios += list(per)
        if len(per):
            said.append(f"{method} ×{per.median():.2f} (×{per.min():.2f}–×{per.max():.2f})")
    checks.append(Check(
        "10× the budget gives about 3× lower RAE (1/√budget) for IS and the hybrid",
        "\"a 10× budget gives roughly a three times reduction in RAE\" (App. G.2)",
        ("median RAE at S over at 10·S, over K and decades: " + "; ".join(said)
         + f" [{len(ratios)} ratios]") if ratios else "one decade of S not yet complete",
        share(sum(2.0 <= r <= 4.5 for r in ratios), len(ratios))))
    if "naive" in median.columns:
        naive = median["naive"]
        zero = run.rows[run.rows.method == "naive"].groupby("budget_level").estimate.apply(
            lambda e: (e == 0).mean())
        at_one = naive[naive >= 0.999]
        checks.append(Check(
            "naive MC is consistently 0: RAE of 1", "App. G.2 (Figs 10, 11)",
            f"median RAE 1 in {len(at_one)} of {len(naive)} (K, S), up to S = "
            f"{max((s for _, s in at_one.index), default='–')}; estimates of 0: "
            f"{zero.iloc[0]:.0%} at S = {zero.index[0]} → {zero.iloc[-1]:.0%} at S = "
            f"{zero.index[-1]}; median RAE at S = {zero.index[-1]}: "
            + ", ".join(f"{fmt(naive[(k, zero.index[-1])])} (K = {k})" for k in ks),
            share(len(at_one), len(naive))))
    if "uniform" in median.columns:
        uniform = median["uniform"]
        bad = uniform[uniform >= 0.95]
        same = int(((median["naive"] >= 0.999) & (uniform >= 0.999)).sum()
                   if "naive" in median.columns else 0)
        checks.append(Check(
            "uniform MC has a high variance and often coincides with naive MC",
            "App. G.2 (Figs 10, 11)",
            f"median RAE ≥ 0.95 in {len(bad)} of {len(uniform)} (K, S); both at RAE 1 in "
            f"{same}; mean RAE up to {mean['uniform'].max():.2f} (median ≤ "
            f"{uniform.max():.2f}: rare large overestimates)",
            share(len(bad), len(uniform))))
    return checks


def fig12(run: ModelRun) -> list[Check]:
    """Fig. 12: coverage beam search needs exponentially many beams in K, more for larger α."""
    growth = beam_growth(run.rows)
    if growth.empty:
        return [Check("the number of beams grows exponentially in K", "App. G.5 (Fig. 12)",
                      "no beam sizes recorded", UNKNOWN)]
    factors, fits = {}, {}
    for method in growth.columns:
        # the last step keeps only the paths that end in the query's set: left out of the fit
        steps = growth[method].dropna().iloc[:-1] if len(growth) > 2 else growth[method]
        slope, r2 = _log_fit(steps)
        factors[method], fits[method] = math.exp(slope), r2
    alphas = [alpha_of(m) for m in growth.columns]
    exponential = all(f > 1.5 and fits[m] >= 0.9 for m, f in factors.items())
    last = growth.iloc[-2] if len(growth) > 2 else growth.iloc[-1]
    return [
        Check("the number of beams grows exponentially in K", "App. G.5 (Fig. 12)",
              "median beams per step, steps 1…K−1: "
              + "; ".join(f"α = {a}: ×{factors[m]:.1f} per step (R² of the log-linear fit "
                          f"{fits[m]:.2f})" for a, m in zip(alphas, growth.columns, strict=True)),
              YES if exponential else MOSTLY if all(f > 1 for f in factors.values()) else NO),
        Check("a larger α needs more beams", "Fig. 12 (α = 0.95, 0.75, 0.5)",
              f"median beams at step {last.name}: "
              + ", ".join(f"{last[m]:,.0f} (α = {a})"
                          for a, m in zip(alphas, growth.columns, strict=True)),
              YES if np.all(np.diff(last.to_numpy()) <= 0) else NO),
    ]


def _log_fit(values: pd.Series) -> tuple[float, float]:
    """Slope and R² of log(values) against their index (steps)."""
    values = values[values > 0]
    if len(values) < 2:
        return math.nan, math.nan
    x, y = values.index.to_numpy(float), np.log(values.to_numpy(float))
    slope, intercept = np.polyfit(x, y, 1)
    residual = y - (slope * x + intercept)
    total = ((y - y.mean()) ** 2).sum()
    return float(slope), float(1 - (residual ** 2).sum() / total) if total > 0 else 1.0


def fig13(run: ModelRun) -> list[Check]:
    """Figs 4b and 13: as T rises, beam search's RAE goes to 1 and importance sampling's to 0;
    temperature induces beam-search error."""
    median = pivot(run.rows, ["temperature"])
    ts = list(median.index)
    beam, importance = median["beam"], median["importance"]
    hot = max(ts) > 1.0  # the claims are about tempering above T = 1, flattening the model
    across = " → ".join(f"{t:g}" for t in ts)

    def curve(values: pd.Series) -> str:
        return " → ".join(fmt(v) for v in values) + f" (T = {across})"

    rising = int((np.diff(beam.to_numpy()) > 0).sum())
    return [
        Check("as T rises, beam search's RAE goes to 1", "Fig. 4b (Mobile Apps), Fig. 13",
              "beam median RAE " + curve(beam),
              UNKNOWN if not hot else YES if beam.iloc[-1] >= 0.9 and rising == len(ts) - 1
              else MOSTLY if beam.iloc[-1] > beam.iloc[0] else NO),
        Check("as T rises, importance sampling's RAE goes to 0", "Fig. 4b",
              "importance median RAE " + curve(importance),
              UNKNOWN if not hot else YES if importance.iloc[-1] < min(0.1, importance.iloc[0])
              else MOSTLY if importance.iloc[-1] < importance.iloc[0] else NO),
        Check("temperature induces beam-search error", "Fig. 13 (all datasets)",
              f"beam median RAE higher at every larger T in {rising} of {len(ts) - 1} steps; "
              f"beam / hybrid at T = {ts[-1]:g}: "
              + (f"{beam.iloc[-1] / median[SETTER].iloc[-1]:.1f}×"
                 if median[SETTER].iloc[-1] > 0 else "–"),
              UNKNOWN if not hot else share(rising, len(ts) - 1)),
    ]


def fig14(run: ModelRun) -> list[Check]:
    """Fig. 14: the unaccounted probability falls with K, under 10% at K = 30 (except Mobile
    Apps)."""
    stats = unaccounted_summary(run.rows)
    stats = stats[stats.method == stats.method.iloc[0]].set_index("K")
    ks, means = list(stats.index), stats["mean"]
    under = means[means < 0.1]
    at = stats.loc[ks[-1]]
    falls = int((np.diff(means.to_numpy()) < 0).sum())
    return [
        Check("K = 30 brings the unaccounted probability under 10% (except on Mobile Apps)",
              "App. G.6 (Fig. 14, 1000 samples)",
              f"mean at K = {ks[-1]}: {at['mean']:.1%} [99% CI {at.ci99_low:.1%}, "
              f"{at.ci99_high:.1%}]; under 10% from K = "
              + (f"{under.index.min()}" if len(under) else f"– (not by K = {ks[-1]})"),
              # the 99% interval decides: under 10% (yes), above (no), across it (a mean under
              # 10%: mostly; over: too few histories yet to tell)
              UNKNOWN if ks[-1] < 30 else YES if at.ci99_high < 0.1 else NO
              if at.ci99_low > 0.1 else MOSTLY if at["mean"] < 0.1 else UNKNOWN),
        Check("it falls as K grows", "Fig. 14",
              f"lower at every larger K in {falls} of {len(ks) - 1} steps: "
              + " → ".join(f"{m:.1%}" for m in means.iloc[[0, len(ks) // 2, -1]])
              + f" (K = {ks[0]}, {ks[len(ks) // 2]}, {ks[-1]})",
              share(falls, len(ks) - 1)),
    ]


def fig15(run: ModelRun) -> list[Check]:
    """Fig. 15: P(A before B) rises with the share of A in the history, roughly linearly."""
    stats = share_means(run.rows.assign(share=run.rows.group.str.removeprefix("share=")
                                        .astype(float)))
    slope, intercept = np.polyfit(stats.share, stats["mean"], 1)
    fitted = slope * stats.share + intercept
    total = ((stats["mean"] - stats["mean"].mean()) ** 2).sum()
    r2 = float(1 - ((stats["mean"] - fitted) ** 2).sum() / total) if total > 0 else math.nan
    rises = int((np.diff(stats["mean"].to_numpy()) > 0).sum())
    first, last = stats.iloc[0], stats.iloc[-1]
    return [
        Check("P(A before B) increases with the share of A in the history",
              "App. G.7 (Fig. 15, Mobile Apps: social media before direct communication)",
              f"mean p̂ {first['mean']:.3f} (share {first.share:g}) → {last['mean']:.3f} "
              f"(share {last.share:g}); higher at every larger share in {rises} of "
              f"{len(stats) - 1} steps", share(rises, len(stats) - 1)),
        Check("the trend is roughly linear", "Fig. 15",
              f"least-squares line {slope:+.3f} per unit share, R² = {r2:.2f} over the "
              f"{len(stats)} shares' means",
              YES if r2 >= 0.9 and slope > 0 else MOSTLY if r2 >= 0.7 and slope > 0 else NO),
    ]
