// The timeline writers. Each takes a Timeline (simulated or measured) and
// returns the file's text; write_file() puts it on disk.
#pragma once

#include <string>

#include "baton/trace/timeline.h"

namespace baton::trace {

// Text grid, one row per rank as in the papers' figures: time runs left to
// right in columns of the shortest event's duration; each event fills
// round(duration / column) cells labelled with its kind and micro-batch
// ("F3", "B3", "I3", "W3"; with several stages per rank the stage too, as
// "2F3"); idle cells are ".". A rank's gradient reductions (REDUCE_GRAD,
// which overlap its compute, REDUCE_TIED and CLIP_NORM) fill a row of their
// own below it, labelled "dp", as "R<bucket>" ("1R0" with the stage),
// "T<group>" and "C0".
std::string to_grid(const Timeline& timeline);

// SVG Gantt chart: a row per rank, a colour per action kind, the micro-batch
// number in each box, a time axis, a legend, and a title with the timeline's
// title and bubble fraction. With memory points, a lane per rank under the
// axis draws each rank's bytes over the same time, on one scale for all
// ranks, its peak labelled in MiB.
std::string to_svg(const Timeline& timeline);

// Chrome trace JSON (opens in Perfetto and chrome://tracing): one track
// (thread) per rank, one complete ("X") event per action, times in
// microseconds (cost-model units are written as if they were milliseconds).
// A rank's REDUCE_GRAD, REDUCE_TIED and CLIP_NORM events go on a second track, "rank r
// dp" (thread id ranks + r), right below it, since they overlap its compute.
// Memory points are counter ("C") events, "memory rank r", in MiB.
std::string to_chrome_trace(const Timeline& timeline);

// Writes `text` to `path`; throws baton::Error naming the path on failure.
void write_file(const std::string& path, const std::string& text);

}  // namespace baton::trace
