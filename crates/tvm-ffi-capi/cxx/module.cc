// The out-of-line members of tvm::ffi::ModuleObj and tvm::ffi::Module: the default behaviour
// of C++ subclasses, the searches through imports, loading from a file. WriteToFile is the key
// function, so the vtable and typeinfo of ModuleObj are defined here.
#include <tvm/ffi/module.h>

#include <unordered_set>
#include <vector>

namespace tvm::ffi {
namespace {

/*! \brief The modules an import list holds (a TypeError for anything else). */
std::vector<Module> ModulesOf(const Array& imports) {
  std::vector<Module> modules;
  modules.reserve(static_cast<size_t>(imports.size()));
  for (AnyView item : imports) modules.push_back(item.cast<Module>());
  return modules;
}

/*! \brief Whether `target` is `start` or is reached from it through imports. */
bool Reaches(const ModuleObj* start, const ModuleObj* target) {
  std::unordered_set<const ModuleObj*> seen{start};
  std::vector<const ModuleObj*> pending{start};
  while (!pending.empty()) {
    const ModuleObj* next = pending.back();
    pending.pop_back();
    if (next == target) return true;
    for (const Module& import : ModulesOf(next->imports())) {
      if (seen.insert(&*import).second) pending.push_back(&*import);
    }
  }
  return false;
}

}  // namespace

void ModuleObj::WriteToFile(const String& /*file_name*/, const String& /*format*/) const {
  TVM_FFI_THROW(RuntimeError) << "Module[" << kind() << "] does not support WriteToFile";
}

Bytes ModuleObj::SaveToBytes() const {
  TVM_FFI_THROW(RuntimeError) << "Module[" << kind() << "] does not support SaveToBytes";
}

void ModuleObj::ImportModule(const Module& other) {
  if (!other.defined()) TVM_FFI_THROW(ValueError) << "Cannot import a null module";
  if (Reaches(&*other, this)) {
    TVM_FFI_THROW(RuntimeError) << "Cyclic dependency detected during import";
  }
  std::vector<Any> items;
  items.reserve(static_cast<size_t>(imports_.size()) + 1);
  for (AnyView item : imports_) items.emplace_back(item);
  items.emplace_back(other);
  imports_ = Array::FromValues(items);
}

void ModuleObj::ClearImports() { imports_ = Array::Make(); }

Optional<Function> ModuleObj::GetFunction(const String& name, bool query_imports) {
  Optional<Function> own = GetFunction(name);
  if (own.has_value() || !query_imports) return own;
  for (const Module& import : ModulesOf(imports_)) {
    Optional<Function> found = import->GetFunction(name, true);
    if (found.has_value()) return found;
  }
  return std::nullopt;
}

bool ModuleObj::ImplementsFunction(const String& name, bool query_imports) {
  if (ImplementsFunction(name)) return true;
  if (!query_imports) return false;
  for (const Module& import : ModulesOf(imports_)) {
    if (import->ImplementsFunction(name, true)) return true;
  }
  return false;
}

Optional<String> ModuleObj::GetFunctionDoc(const String& name, bool query_imports) {
  Optional<String> own = GetFunctionDoc(name);
  if (own.has_value() || !query_imports) return own;
  for (const Module& import : ModulesOf(imports_)) {
    Optional<String> found = import->GetFunctionDoc(name, true);
    if (found.has_value()) return found;
  }
  return std::nullopt;
}

Optional<String> ModuleObj::GetFunctionMetadata(const String& name, bool query_imports) {
  Optional<String> own = GetFunctionMetadata(name);
  if (own.has_value() || !query_imports) return own;
  for (const Module& import : ModulesOf(imports_)) {
    Optional<String> found = import->GetFunctionMetadata(name, true);
    if (found.has_value()) return found;
  }
  return std::nullopt;
}

Module Module::LoadFromFile(const String& file_name) {
  static const Function* load = new Function(Function::GetGlobalRequired("ffi.ModuleLoadFromFile"));
  return (*load)(file_name).cast<Module>();
}

void Module::VisitContextSymbols(const TypedFunction<void(String, void*)>& callback) {
  // Name, address, name, address, ...
  Array symbols = Function::GetGlobalRequired("ffi.GetContextSymbols")().cast<Array>();
  for (int64_t i = 0; i + 1 < symbols.size(); i += 2) {
    callback(symbols[i].cast<String>(), symbols[i + 1].cast<void*>());
  }
}

}  // namespace tvm::ffi
