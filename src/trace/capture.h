// Feeding a capture file to the Analyzer (check.h): capture::for_each_roce_frame
// reads and decodes it; what is not RoCEv2 is skipped.
#pragma once
#include <string>

#include "capture/frames.h"
#include "trace/check.h"

namespace rocelab::trace {

using capture::CaptureRead;

// Reads path to its end (or to the damage) into an. *error gets the reason
// when the file cannot be opened as a capture.
CaptureRead analyze_capture(const std::string& path, Analyzer& an, std::string* error);

}  // namespace rocelab::trace
