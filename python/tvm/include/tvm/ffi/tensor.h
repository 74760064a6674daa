/*
 * tvm/ffi/tensor.h -- TensorView: a borrowed view of a DLTensor, from an ffi.Tensor argument (the
 * DLTensor at offset 24 of the object) or a DLTensor* argument. It holds no reference: it is valid
 * while the argument is, i.e. for the duration of a call.
 */
#ifndef TVM_FFI_TENSOR_H_
#define TVM_FFI_TENSOR_H_

#include <tvm/ffi/any.h>

#include <cstdint>
#include <optional>
#include <vector>

namespace tvm::ffi {

/*! \brief A borrowed DLTensor with non-NULL strides (compact ones are filled in if missing). */
class TensorView {
 public:
  TensorView() noexcept = default;
  /*! \brief Views a DLTensor (borrowed). */
  explicit TensorView(DLTensor* tensor) : tensor_(tensor) { FillStrides(); }
  /*! \brief Views the DLTensor of an ffi.Tensor object (borrowed). */
  static TensorView FromObject(TVMFFIObject* tensor_obj) {
    TensorView view(TVMFFITensorGetDLTensorPtr(tensor_obj));
    view.obj_ = tensor_obj;
    return view;
  }

  bool defined() const noexcept { return tensor_ != nullptr; }
  /*! \brief The viewed DLTensor. */
  DLTensor* get() const noexcept { return tensor_; }
  DLTensor* operator->() const noexcept { return tensor_; }
  /*! \brief The ffi.Tensor this views, or nullptr for a plain DLTensor*. */
  TVMFFIObject* object() const noexcept { return obj_; }

  int32_t ndim() const noexcept { return tensor_->ndim; }
  const int64_t* shape() const noexcept { return tensor_->shape; }
  int64_t shape(int32_t i) const noexcept { return tensor_->shape[i]; }
  /*! \brief Strides in elements; never NULL when ndim > 0. */
  const int64_t* strides() const noexcept {
    return tensor_->strides != nullptr ? tensor_->strides : compact_strides_.data();
  }
  int64_t stride(int32_t i) const noexcept { return strides()[i]; }
  DLDataType dtype() const noexcept { return tensor_->dtype; }
  DLDevice device() const noexcept { return tensor_->device; }
  /*! \brief The address of the first element (data + byte_offset). */
  void* data_ptr() const noexcept {
    return static_cast<char*>(tensor_->data) + tensor_->byte_offset;
  }
  /*! \brief The number of elements. */
  int64_t numel() const noexcept {
    int64_t n = 1;
    for (int32_t i = 0; i < tensor_->ndim; ++i) n *= tensor_->shape[i];
    return n;
  }

  /*! \brief Whether the dtype is float32 with one lane. */
  bool IsFloat32() const noexcept {
    DLDataType t = dtype();
    return t.code == kDLFloat && t.bits == 32 && t.lanes == 1;
  }
  /*!
   * \brief Whether the elements are compact in row-major order. Extents of 1 may have any
   *  stride; a tensor without elements counts as contiguous.
   */
  bool IsContiguous() const noexcept {
    const int64_t* st = strides();
    for (int32_t i = 0; i < ndim(); ++i) {
      if (shape(i) == 0) return true;
    }
    int64_t expected = 1;
    for (int32_t i = ndim() - 1; i >= 0; --i) {
      if (shape(i) != 1 && st[i] != expected) return false;
      expected *= shape(i);
    }
    return true;
  }

 private:
  void FillStrides() {
    if (tensor_ == nullptr || tensor_->strides != nullptr || tensor_->ndim <= 0) return;
    size_t ndim = static_cast<size_t>(tensor_->ndim);
    compact_strides_.assign(ndim, 1);
    for (size_t i = ndim - 1; i > 0; --i) {
      compact_strides_[i - 1] = compact_strides_[i] * tensor_->shape[i];
    }
  }

  DLTensor* tensor_ = nullptr;
  TVMFFIObject* obj_ = nullptr;
  std::vector<int64_t> compact_strides_;
};

template <>
struct TypeTraits<TensorView> {
  static constexpr bool kEnabled = true;
  static constexpr const char* kTypeName = "ffi.Tensor";
  /*! \brief The ffi.Tensor it came from, else a DLTensor* (None when undefined). */
  static void ToView(const TensorView& value, TVMFFIAny* out) noexcept {
    if (value.object() != nullptr) {
      *out = details::ObjectView(value.object());
    } else {
      TypeTraits<DLTensor*>::ToView(value.get(), out);
    }
  }
  static void MoveToAny(const TensorView& value, TVMFFIAny* out) noexcept {
    ToView(value, out);
    if (value.object() != nullptr) details::IncRef(value.object());
  }
  /*! \brief An ffi.Tensor or a DLTensor* (borrowed). */
  static std::optional<TensorView> TryFrom(const TVMFFIAny& v) {
    if (v.type_index == kTVMFFITensor) return TensorView::FromObject(v.v_obj);
    if (v.type_index == kTVMFFIDLTensorPtr) return TensorView(static_cast<DLTensor*>(v.v_ptr));
    return std::nullopt;
  }
};

}  // namespace tvm::ffi

#endif  // TVM_FFI_TENSOR_H_
