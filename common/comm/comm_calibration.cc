#include "common/comm/comm_calibration.h"

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "google/protobuf/util/json_util.h"

namespace moetune::comm {
namespace {

absl::Status CheckFit(const v1::CollectiveFit& fit, int index) {
  const std::string at = absl::StrCat("fits[", index, "].");
  if (fit.allreduce() != "nccl" && fit.allreduce() != "oneshot") {
    return absl::InvalidArgumentError(absl::StrCat(
        at, "allreduce: '", fit.allreduce(), "'; allowed: nccl, oneshot"));
  }
  if (!fit.op().empty() && fit.op() != "allreduce" && fit.op() != "allgather" &&
      fit.op() != "reducescatter") {
    return absl::InvalidArgumentError(
        absl::StrCat(at, "op: '", fit.op(),
                     "'; allowed: allreduce, allgather, reducescatter"));
  }
  if (fit.world_size() < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(at, "world_size: ", fit.world_size(), "; must be >= 1"));
  }
  if (fit.latency_us() < 0 || fit.bus_gbps() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(at, "latency_us and bus_gbps must be >= 0"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<v1::CommCalibration> LoadCommCalibration(
    const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return absl::NotFoundError(
        absl::StrCat("--comm_calibration: cannot read ", path));
  }
  std::stringstream text;
  text << in.rdbuf();
  v1::CommCalibration calibration;
  const auto parsed =
      google::protobuf::util::JsonStringToMessage(text.str(), &calibration);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--comm_calibration ", path, ": ", parsed.ToString()));
  }
  for (int i = 0; i < calibration.fits_size(); ++i) {
    const absl::Status status = CheckFit(calibration.fits(i), i);
    if (!status.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--comm_calibration ", path, ": ", status.message()));
    }
  }
  return calibration;
}

CommModelParams ParamsFrom(const v1::CommCalibration& calibration) {
  CommModelParams params;
  for (const v1::CollectiveFit& fit : calibration.fits()) {
    if (!fit.in_graph()) params.fits.push_back(fit);
  }
  if (!params.fits.empty()) {
    const v1::Fingerprint& fp = calibration.fingerprint();
    params.source =
        absl::StrCat("calibrated on ", calibration.gpus(), "x ",
                     fp.device_name(), " (NCCL ", fp.nccl_version(), ")");
  }
  return params;
}

}  // namespace moetune::comm
